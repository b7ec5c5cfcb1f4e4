// Package apptest serves the real application (internal/app, exactly what
// the nornweave command runs) on a loopback port for tests and benchmarks.
package apptest

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/providers/notify"
)

// Config returns a valid configuration with the documented defaults: the
// demo provider on a fresh database of driver ("postgres" or "sqlite"),
// listening on loopback, throttle off, a PostgreSQL pool of 4, and held
// mail polled for every second (HeldPollInterval): a test that times held
// mail sets 0, the default of 50 ms.
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
		// Tests run in parallel beside other packages' and another make
		// test: the whole run must fit in PostgreSQL's 100 connections.
		DatabaseMaxConnections: 4,
		AdminSessionTTL:        12 * time.Hour,
	}
	// An idle server polls for due held mail twenty times a second at the
	// default; on SQLite under -race each poll costs about 25 ms of CPU, so
	// a server that sends no held mail would spend half a core on it
	// (issue 28). Once a second is a twentieth of that.
	cfg.HeldPollInterval = time.Second
	// A relay's answer can wait on a starved process: beside another make
	// test (load 20), SQLite statements took 9 s and the in-process relay's
	// 250 came after the default 15 s, failing a send that had nothing
	// wrong with it. Here SMTP_TIMEOUT bounds a hang, under SEND_TIMEOUT;
	// a test of deadlines sets its own.
	cfg.SMTPTimeout = 45 * time.Second
	if driver == "postgres" {
		cfg.DatabaseURL = testdb.PostgresMigratedURL(tb, testdb.SchemaKey(tb), migrate(cfg))
	} else {
		cfg.DatabaseURL = testdb.SQLiteMigratedPath(tb, testdb.SchemaKey(tb), migrate(cfg))
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
	// PageBytes caps one list answer's bodies (0: 8 MiB); see
	// app.WithPageBytes.
	PageBytes int64
	// CertFetch reads SNS's certificates (nil: HTTPS to AWS); see
	// app.WithCertFetcher.
	CertFetch func(ctx context.Context, url string) ([]byte, error)
	// WebhookClient and WebhookResolver replace webhooks out's client
	// options and URL resolver; see app.WithWebhookClient.
	WebhookClient   *notify.Options
	WebhookResolver notify.Resolver
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
	if o.PageBytes > 0 {
		opts = append(opts, app.WithPageBytes(o.PageBytes))
	}
	if o.CertFetch != nil {
		opts = append(opts, app.WithCertFetcher(o.CertFetch))
	}
	if o.WebhookClient != nil {
		opts = append(opts, app.WithWebhookClient(*o.WebhookClient))
	}
	if o.WebhookResolver != nil {
		opts = append(opts, app.WithWebhookResolver(o.WebhookResolver))
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
