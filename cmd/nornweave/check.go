package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
)

// check reports, one line each, whether the configuration is valid (it is,
// by now), the database answers and is migrated, and the provider can be
// reached; it serves nothing and changes nothing. 0 when all is well.
func check(ctx context.Context, cfg config.Config, stdout io.Writer, logger *slog.Logger) int {
	fmt.Fprintln(stdout, "ok    configuration")
	failed := false
	report := func(what string, err error) {
		if err != nil {
			failed = true
			fmt.Fprintf(stdout, "FAIL  %s: %v\n", what, err)
			return
		}
		fmt.Fprintf(stdout, "ok    %s\n", what)
	}

	db := "database " + cfg.DBDriver + " " + app.DescribeDatabase(cfg)
	st, err := app.OpenStore(ctx, cfg, logger)
	if err != nil {
		report(db, err)
	} else {
		// Pending migrations are normal before the first start, which
		// applies them; a schema newer than this binary is an error.
		pending, err := st.PendingMigrations(ctx)
		if err == nil && len(pending) > 0 {
			db += fmt.Sprintf(" (%d migrations pending; serve or migrate applies them)", len(pending))
		}
		report(db, err)
		st.Close()
	}

	what, err := app.CheckProvider(ctx, cfg, logger)
	report(what, err)
	if failed {
		return 1
	}
	return 0
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
