package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
)

// check reports, one line each, whether the configuration is valid (it is,
// by now: run prints "FAIL  configuration" itself), then each of
// app.Checks: the database, the provider reached without sending, and what
// else the configuration needs. It serves nothing, sends nothing and
// creates nothing. 0 when nothing failed; a warning does not fail it.
func check(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger) int {
	fmt.Fprintln(stdout, "ok    configuration")
	code := 0
	for _, c := range app.Checks(cfg, logger) {
		r := app.RunCheck(ctx, c)
		line := fmt.Sprintf("%-6s%s", r.Status, c.Name)
		if r.Detail != "" {
			line += " " + r.Detail
		}
		if r.Err != nil {
			line += ": " + r.Err.Error()
		}
		fmt.Fprintln(stdout, line)
		if r.Status == app.CheckFail {
			code = 1
		}
	}
	return code
}

// pid1Cmdline is where Linux shows the command line of the container's
// main process: the server, in the image.
const pid1Cmdline = "/proc/1/cmdline"

// serverAddrFlags returns the --host and --port the nornweave server
// running as PID 1 was started with, read from cmdline (pid1Cmdline). The
// image's HEALTHCHECK runs `nornweave healthcheck` beside that server, in
// its environment but not with its flags: `docker run … serve --port 9000`
// would be checked on 8000 without this. Nothing when PID 1 is not a
// nornweave server (outside a container, it is init).
func serverAddrFlags(cmdline string) map[string]string {
	b, err := os.ReadFile(cmdline)
	if err != nil {
		return nil
	}
	args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
	if filepath.Base(args[0]) != "nornweave" {
		return nil
	}
	inv, err := parseArgs(args[1:])
	if err != nil || inv.cmd != "serve" {
		return nil
	}
	flags := map[string]string{}
	for _, name := range []string{"HOST", "PORT"} {
		if v, ok := inv.overrides[name]; ok {
			flags[name] = v
		}
	}
	return flags
}

// healthcheck asks the server on this machine for /health. A server
// listening on every interface is asked on loopback.
func healthcheck(ctx context.Context, cfg config.Config, stderr io.Writer) int {
	host := cfg.Host
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, strconv.Itoa(cfg.Port)) + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		fmt.Fprintln(stderr, "nornweave healthcheck:", err)
		return 1
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "nornweave healthcheck:", err)
		return 1
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		fmt.Fprintf(stderr, "nornweave healthcheck: %s answered %s\n", url, res.Status)
		return 1
	}
	return 0
}
