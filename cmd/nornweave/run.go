package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/mcpstdio"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usageHead = `Usage: nornweave [flags] [command] [flags]

Commands:
  serve     run the server (the default)
  migrate   apply database migrations, list what was applied, and exit;
            --dry-run lists the pending ones instead
  check     validate the configuration, open the database, reach the
            provider (nothing is sent), report one line each, and exit
            (0: all good, 1: a problem)
  limits    print the throttle the servers on the database share;
            limits set VARIABLE=N ... changes the limits of every running
            server (GLOBAL_SEND_RATE_LIMIT_PER_MINUTE and the three others);
            limits from-ses [--margin 0.9] prints the limits that match the
            SES account's quota, as lines for an env file
  healthcheck
            GET /health on this machine's server (HOST, PORT); exit 0 when
            it answers 200: the container image's HEALTHCHECK, which has
            no curl
  mcp       MCP over stdio, for AI clients that launch a command (Claude
            Desktop, Cursor): forwards to the running server's /mcp at
            NORNWEAVE_API_URL with NORNWEAVE_API_KEY; stdout carries
            protocol messages only, logs go to stderr
  version   print the version and exit
  help      print this help

Configuration comes from the environment and ./.env; every variable also has
a flag of the same name in lower case with dashes (PORT is --port), and a
flag wins over the environment. Flags may come before or after the command.
See README.md and .env.example.

Flags:
`

// usageHint follows a usage error, instead of the whole usage.
const usageHint = "Run 'nornweave help' for the commands and flags."

// commands are the words run accepts as a command.
var commands = []string{"serve", "migrate", "check", "limits", "healthcheck", "mcp", "version", "help"}

// run is the whole program; it returns the exit code: 0 success, 1 a
// failure at run time or in the configuration, 2 a bad command line. stdin
// is read by mcp only.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	inv, err := parseArgs(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		printUsage(stdout)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "nornweave: %v\n%s\n", err, usageHint)
		return 2
	}
	switch inv.cmd {
	case "version":
		fmt.Fprintln(stdout, "nornweave", version)
		return 0
	case "help":
		printUsage(stdout)
		return 0
	}

	if inv.cmd == "healthcheck" {
		// The server's own --host and --port; the check's flags win.
		flags := map[string]string{}
		maps.Copy(flags, serverAddrFlags(pid1Cmdline))
		maps.Copy(flags, inv.overrides)
		inv.overrides = flags
	}
	cfg, err := config.LoadWith(".env", inv.overrides)
	validate := cfg.Validate
	if inv.cmd == "mcp" {
		validate = cfg.ValidateMCPClient // runs beside an agent, not where the server is configured
	}
	if err = errors.Join(err, validate()); err != nil {
		if inv.cmd == "check" {
			// check reports on stdout, one line per check; this is the first.
			fmt.Fprintf(stdout, "FAIL  configuration:\n%s\n", indent(err))
			return 1
		}
		fmt.Fprintf(stderr, "nornweave: configuration error:\n%s\n", indent(err))
		return 1
	}
	if inv.cmd == "healthcheck" {
		return healthcheck(ctx, cfg, stderr)
	}
	level, _ := cfg.SlogLevel()
	logger := logging.NewFormat(stderr, level, cfg.LogFormat)
	if inv.cmd == "check" {
		// check's output is its own lines: what the parts it builds would
		// log (the SQLite file opened, the SES credentials chosen) is in
		// those lines already, or irrelevant to a check.
		logger = slog.New(slog.DiscardHandler)
	}
	// go-redis (THROTTLE_BACKEND=redis) logs through a package-level
	// logger that writes plain lines to stderr; through slog they are
	// lines like every other, JSON under LOG_FORMAT=json.
	redis.SetLogger(logging.PrintfLogger{Logger: logger, Level: slog.LevelWarn, Msg: "redis client"})

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch inv.cmd {
	case "check":
		return check(ctx, cfg, stdout, logger)
	case "mcp":
		err = mcpstdio.Serve(ctx, mcpstdio.Options{Endpoint: cfg.MCPEndpoint(), APIKey: cfg.MCPAPIKey,
			In: io.NopCloser(stdin), Out: nopCloser{stdout}, Logger: logger, Version: version})
	case "limits":
		return limits(ctx, cfg, append(inv.args, inv.sesFlags...), stdout, stderr, logger)
	case "migrate":
		err = migrate(ctx, cfg, logger, inv.dryRun, stdout)
	default:
		err = serve(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("exiting", slog.Any("error", err))
		return 1
	}
	return 0
}

// invocation is a parsed command line.
type invocation struct {
	cmd       string            // one of commands; serve when none was given
	overrides map[string]string // variable name → value, from the flags
	dryRun    bool              // migrate --dry-run
	args      []string          // the words after limits: set VARIABLE=N ...
	// sesFlags are limits from-ses's flags (--margin=V), handed on as
	// given: the flags may stand anywhere, so this parser must know them,
	// but from-ses owns their meaning.
	sesFlags []string
}

// parseArgs reads the command and its flags: one per configuration
// variable, plus --dry-run (migrate's), --margin (limits from-ses's) and
// --version. Flags may come before the command, after it, or both:
// "nornweave --port 9000 check". The error is one sentence, in the usage's
// words ("--port", not flag's "-port"); flag.ErrHelp for -h or --help.
func parseArgs(args []string) (invocation, error) {
	inv := invocation{overrides: map[string]string{}}
	var showVersion bool
	fs := newFlagSet(inv.overrides, &inv.dryRun)
	fs.BoolVar(&showVersion, "version", false, "print the version and exit")
	fs.BoolVar(&showVersion, "v", false, "print the version and exit")
	fs.Func("margin", "limits from-ses: the share of SES's quota to use", func(v string) error {
		inv.sesFlags = append(inv.sesFlags, "--margin="+v)
		return nil
	})
	for {
		if err := fs.Parse(args); err != nil {
			return inv, flagError(err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		switch {
		case inv.cmd == "limits":
			inv.args, args = append(inv.args, rest[0]), rest[1:]
			continue
		case inv.cmd != "":
			return inv, fmt.Errorf("unexpected argument %q", rest[0])
		case !slices.Contains(commands, rest[0]):
			msg := fmt.Sprintf("unknown command %q", rest[0])
			if near := nearest(rest[0], commands); near != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", near)
			}
			return inv, errors.New(msg)
		}
		inv.cmd, args = rest[0], rest[1:]
	}
	switch {
	case showVersion:
		inv.cmd = "version"
	case inv.cmd == "":
		inv.cmd = "serve"
	}
	if inv.dryRun && inv.cmd != "migrate" {
		return inv, fmt.Errorf("--dry-run is a flag of migrate, not of %s", inv.cmd)
	}
	if len(inv.sesFlags) > 0 && (inv.cmd != "limits" || len(inv.args) == 0 || inv.args[0] != "from-ses") {
		of := inv.cmd
		if len(inv.args) > 0 {
			of += " " + inv.args[0]
		}
		return inv, fmt.Errorf("--margin is a flag of limits from-ses, not of %s", of)
	}
	return inv, nil
}

// flagError words the flag package's errors as the usage writes flags.
func flagError(err error) error {
	if errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		var flags []string
		for _, v := range config.Vars() {
			flags = append(flags, v.Flag())
		}
		if near := nearest(name, append(flags, "dry-run", "margin", "version")); near != "" {
			msg += " (did you mean --" + near + "?)"
		}
	} else if name, ok := strings.CutPrefix(msg, "flag needs an argument: "); ok {
		msg = "flag --" + strings.TrimLeft(name, "-") + " needs a value"
	}
	return errors.New(msg)
}

// nearest is the candidate within two edits of word, if exactly one is
// closest: "prot" → "port".
func nearest(word string, candidates []string) string {
	best, bestD, tie := "", 3, false
	for _, c := range candidates {
		switch d := editDistance(word, c); {
		case d < bestD:
			best, bestD, tie = c, d, false
		case d == bestD:
			tie = true
		}
	}
	if tie {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance, with a swap of two adjacent
// letters counted as one edit (the commonest typo).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// newFlagSet derives the flags from the Config struct, so that every
// variable has its flag and none can be forgotten; --dry-run is checked
// against the command after parsing, since it may come before it.
func newFlagSet(overrides map[string]string, dryRun *bool) *flag.FlagSet {
	fs := flag.NewFlagSet("nornweave", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors are printed by run, in our words
	for _, v := range config.Vars() {
		fs.Var(&varFlag{name: v.Name, isBool: v.Bool, into: overrides}, v.Flag(), v.Name)
	}
	fs.BoolVar(dryRun, "dry-run", false, "list the pending migrations without applying them")
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
	fmt.Fprintf(w, "%-52s %s\n", "  --margin=0.9", "limits from-ses only: the share of SES's quota to use")
}

// nopCloser gives stdout the Close an MCP transport calls on it: the
// process's stdout stays open until it exits.
type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

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
	applied, err := st.MigrateListed(ctx)
	for _, name := range applied {
		fmt.Fprintln(stdout, "applied:", name)
	}
	if err == nil {
		if len(applied) == 0 {
			fmt.Fprintln(stdout, "nothing to apply: the database is up to date")
		}
		logger.Info("migrations applied", slog.Int("applied", len(applied)))
	}
	return errors.Join(err, st.Close())
}
