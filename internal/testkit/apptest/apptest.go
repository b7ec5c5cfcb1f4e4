// Package apptest serves the real application (internal/app, exactly what
// the nornweave command runs) on a loopback port for tests and benchmarks.
package apptest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// Config returns a valid configuration with the documented defaults: the
// demo provider on a fresh database of driver ("postgres" or "sqlite"),
// listening on loopback, throttle off.
func Config(tb testing.TB, driver string) config.Config {
	tb.Helper()
	cfg := config.Config{
		DBDriver: driver, EmailProvider: "demo", EmailDomain: "acme.test",
		SMTPPort: 587, SMTPUseTLS: true, AWSRegion: "us-east-1",
		Environment: "development", LogLevel: "warning", Host: "127.0.0.1",
		AttachmentMaxSizeMB: 25, AttachmentMaxTotalSizeMB: 35, AttachmentMaxCount: 20,
		SendRetryMax: 3, SendRetryDeadline: 30 * time.Second, SendTimeout: time.Minute, SMTPTimeout: 15 * time.Second,
		ProviderTimeout: 30 * time.Second, ProviderMaxConcurrency: 16, SMTPMaxConnections: 4,
		BodyMaxSizeMB: 1, HTMLMaxSizeMB: 2, RequestsInFlightMB: 64, SearchTimeoutSeconds: 10,
	}
	if driver == "postgres" {
		cfg.DatabaseURL = testdb.PostgresMigratedURL(tb, schemaKey(tb), migrate(cfg))
	} else {
		cfg.DatabaseURL = testdb.SQLiteMigratedPath(tb, schemaKey(tb), migrate(cfg))
	}
	return cfg
}

// migrate is testdb's Migrate for cfg's driver: what app.New applies at
// start, so that the app finds its schema current and applies nothing.
func migrate(cfg config.Config) testdb.Migrate {
	return func(ctx context.Context, url string) error {
		cfg.DatabaseURL = url
		st, err := app.OpenStore(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			return err
		}
		defer st.Close()
		return st.Migrate(ctx)
	}
}

var (
	keyOnce sync.Once
	key     string
	keyErr  error
)

// schemaKey names the schema app.New migrates to: a hash of the SQL it
// applies (the app's migrations and the PostgreSQL throttle's schema, read
// from the module's source) and of River's version, whose migrations it
// also applies. A change to any of them makes new template databases.
func schemaKey(tb testing.TB) string {
	tb.Helper()
	keyOnce.Do(func() { key, keyErr = computeSchemaKey() })
	if keyErr != nil {
		tb.Fatalf("schema key for the template databases: %v", keyErr)
	}
	return key
}

func computeSchemaKey() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("no source path for apptest")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	h := sha256.New()
	var paths []string
	for _, glob := range []string{"migrations/*/*.sql", "skuld/throttle/pgthrottle/*.sql"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			return "", err
		}
		paths = append(paths, m...)
	}
	if len(paths) == 0 {
		return "", fmt.Errorf("no migrations found under %s", root)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.ToSlash(strings.TrimPrefix(p, root)), len(b))
		h.Write(b)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information for River's version")
	}
	for _, d := range info.Deps {
		if strings.HasPrefix(d.Path, "github.com/riverqueue/river") {
			fmt.Fprintf(h, "%s %s\n", d.Path, d.Version)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// Server is the app serving on loopback.
type Server struct {
	// URL is the base URL, "http://127.0.0.1:port".
	URL string

	tb     testing.TB
	cancel context.CancelFunc
	done   chan error
}

// Start validates cfg, builds the app and serves it until Stop or the end
// of the test. Server logs at WARN and above go to the test log.
func Start(tb testing.TB, cfg config.Config) *Server {
	tb.Helper()
	return StartWith(tb, cfg, Options{})
}

// Options are what StartWith changes from Start.
type Options struct {
	// Log receives the server's JSON log lines at LogLevel and above
	// (nil: the test log, at WARN and above).
	Log      io.Writer
	LogLevel slog.Level
	// Clock is the app's time (nil: the system clock); see app.WithClock.
	Clock clock.Clock
	// RetryBase scales River's backoff of held-mail jobs (0: River's
	// own, 1 s then 16 s); see app.WithRetryBase.
	RetryBase time.Duration
}

// StartWith is Start with o.
func StartWith(tb testing.TB, cfg config.Config, o Options) *Server {
	tb.Helper()
	if err := cfg.Validate(); err != nil {
		tb.Fatalf("test configuration invalid: %v", err)
	}
	logger := logging.New(LogWriter{tb}, slog.LevelWarn)
	if o.Log != nil {
		logger = logging.New(o.Log, o.LogLevel)
	}
	var opts []app.Option
	if o.Clock != nil {
		opts = append(opts, app.WithClock(o.Clock))
	}
	if o.RetryBase > 0 {
		opts = append(opts, app.WithRetryBase(o.RetryBase))
	}
	a, err := app.New(context.Background(), cfg, logger, "test", opts...)
	if err != nil {
		tb.Fatalf("app.New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{URL: "http://" + l.Addr().String(), tb: tb, cancel: cancel, done: make(chan error, 1)}
	go func() { s.done <- a.Serve(ctx, l) }()
	tb.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down gracefully, as SIGTERM does, and fails the
// test if the shutdown fails. Calls after the first do nothing.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if err := <-s.done; err != nil {
		s.tb.Errorf("server shutdown: %v", err)
	}
}

// LogWriter writes each log line to the test log, shown on failure.
type LogWriter struct{ TB testing.TB }

func (w LogWriter) Write(p []byte) (int, error) {
	w.TB.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
