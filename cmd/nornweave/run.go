package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"strings"
	"syscall"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usageHead = `Usage: nornweave [command] [flags]

Commands:
  serve     run the server (the default)
  migrate   apply database migrations and exit; --dry-run lists them instead
  check     validate the configuration, connect to the database and the
            provider, report, and exit (0: all good, 1: a problem)
  healthcheck
            GET /health on this machine's server (HOST, PORT); exit 0 when
            it answers 200: the container image's HEALTHCHECK, which has
            no curl
  version   print the version and exit
  help      print this help

Configuration comes from the environment and ./.env; every variable also has
a flag of the same name in lower case with dashes (PORT is --port), and a
flag wins over the environment. See README.md and .env.example.

Flags:
`

// run is the whole program; it returns the exit code: 0 success, 1 a
// failure at run time or in the configuration, 2 a bad command line.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	if len(args) > 0 && (args[0] == "--version" || args[0] == "-v") {
		cmd = "version"
	}
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "nornweave", version)
		return 0
	case "help":
		printUsage(stdout)
		return 0
	case "serve", "migrate", "check", "healthcheck":
	default:
		fmt.Fprintf(stderr, "nornweave: unknown command %q\n\n", cmd)
		printUsage(stderr)
		return 2
	}

	overrides, dryRun, code := parseFlags(cmd, args, stdout, stderr)
	if code >= 0 {
		return code
	}
	cfg, err := config.LoadWith(".env", overrides)
	if err = errors.Join(err, cfg.Validate()); err != nil {
		fmt.Fprintf(stderr, "nornweave: configuration error:\n%s\n", indent(err))
		return 1
	}
	if cmd == "healthcheck" {
		return healthcheck(ctx, cfg, stderr)
	}
	level, _ := cfg.SlogLevel()
	logger := logging.NewFormat(stderr, level, cfg.LogFormat)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch {
	case cmd == "check":
		return check(ctx, cfg, stdout, logger)
	case cmd == "migrate":
		err = migrate(ctx, cfg, logger, dryRun, stdout)
	default:
		err = serve(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("exiting", slog.Any("error", err))
		return 1
	}
	return 0
}

// parseFlags reads the command's flags: one per configuration variable,
// plus --dry-run for migrate. code is -1 to go on, else the exit code.
func parseFlags(cmd string, args []string, stdout, stderr io.Writer) (overrides map[string]string, dryRun bool, code int) {
	fs := newFlagSet(cmd, &overrides, &dryRun)
	fs.SetOutput(io.Discard) // the errors are printed below, in our words
	switch err := fs.Parse(args); {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return nil, false, 0
	case err != nil:
		// flag words it "-prot" whichever way it was typed; the usage
		// shows "--", so say it that way.
		msg := strings.Replace(err.Error(), "flag provided but not defined: -", "unknown flag --", 1)
		fmt.Fprintf(stderr, "nornweave %s: %s\n\n", cmd, msg)
		printUsage(stderr)
		return nil, false, 2
	case fs.NArg() > 0:
		fmt.Fprintf(stderr, "nornweave %s: unexpected argument %q\n\n", cmd, fs.Arg(0))
		printUsage(stderr)
		return nil, false, 2
	}
	return overrides, dryRun, -1
}

// newFlagSet derives the flags from the Config struct, so that every
// variable has its flag and none can be forgotten.
func newFlagSet(cmd string, overrides *map[string]string, dryRun *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("nornweave "+cmd, flag.ContinueOnError)
	*overrides = map[string]string{}
	for _, v := range config.Vars() {
		fs.Var(&varFlag{name: v.Name, isBool: v.Bool, into: *overrides}, v.Flag(), v.Name)
	}
	if cmd == "migrate" {
		fs.BoolVar(dryRun, "dry-run", false, "list the pending migrations without applying them")
	}
	return fs
}

// varFlag records a flag's value under its variable's name; config parses
// it, with the same parser and error as the environment's value.
type varFlag struct {
	name   string
	isBool bool
	into   map[string]string
}

func (f *varFlag) String() string { return "" }

func (f *varFlag) Set(s string) error {
	f.into[f.name] = s
	return nil
}

func (f *varFlag) IsBoolFlag() bool { return f.isBool }

func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	for _, v := range config.Vars() {
		def := v.Default
		if v.Bool && def == "" {
			def = "false"
		}
		line := "  --" + v.Flag()
		if def != "" {
			line += "=" + def
		}
		fmt.Fprintf(w, "%-52s %s\n", line, v.Name)
	}
	fmt.Fprintf(w, "%-52s %s\n", "  --dry-run", "migrate only: list pending migrations")
}

// indent puts each of the joined errors on its own indented line.
func indent(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = "  " + l
	}
	return strings.Join(lines, "\n")
}

func serve(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	l, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return err
	}
	a, err := app.New(ctx, cfg, logger, version)
	if err != nil {
		l.Close()
		return err
	}
	return a.Serve(ctx, l)
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger, dryRun bool, stdout io.Writer) error {
	st, err := app.OpenStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	if dryRun {
		var pending []string
		if pending, err = st.PendingMigrations(ctx); err == nil {
			if len(pending) == 0 {
				fmt.Fprintln(stdout, "nothing to apply: the database is up to date")
			}
			for _, p := range pending {
				fmt.Fprintln(stdout, "pending:", p)
			}
		}
		return errors.Join(err, st.Close())
	}
	err = st.Migrate(ctx)
	if err == nil {
		logger.Info("migrations applied")
	}
	return errors.Join(err, st.Close())
}
