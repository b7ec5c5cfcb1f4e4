package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os/signal"
	"syscall"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `Usage: nornweave [command]

Commands:
  serve     run the server (the default)
  migrate   apply database migrations and exit
  version   print the version and exit

Configuration comes from the environment and ./.env; see README.md.
`

// run is the whole program; it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 {
		cmd = args[0]
	}
	switch cmd {
	case "version", "--version", "-v":
		fmt.Fprintln(stdout, "nornweave", version)
		return 0
	case "help", "--help", "-h":
		fmt.Fprint(stdout, usage)
		return 0
	case "serve", "migrate":
	default:
		fmt.Fprintf(stderr, "nornweave: unknown command %q\n\n%s", cmd, usage)
		return 2
	}

	cfg, err := config.Load(".env")
	if err == nil {
		err = cfg.Validate()
	}
	if err != nil {
		fmt.Fprintf(stderr, "nornweave: configuration error:\n%v\n", err)
		return 1
	}
	level, _ := cfg.SlogLevel()
	logger := logging.New(stderr, level)

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if cmd == "migrate" {
		err = migrate(ctx, cfg, logger)
	} else {
		err = serve(ctx, cfg, logger)
	}
	if err != nil {
		logger.Error("exiting", slog.Any("error", err))
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	l, err := net.Listen("tcp", cfg.Addr())
	if err != nil {
		return err
	}
	a, err := app.New(ctx, cfg, logger)
	if err != nil {
		l.Close()
		return err
	}
	return a.Serve(ctx, l)
}

func migrate(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	st, err := app.OpenStore(ctx, cfg, logger)
	if err != nil {
		return err
	}
	err = st.Migrate(ctx)
	if err == nil {
		logger.Info("migrations applied")
	}
	return errors.Join(err, st.Close())
}
