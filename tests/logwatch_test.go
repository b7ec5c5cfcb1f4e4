package tests

import (
	"context"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// logWatch keeps every line the server logs (and shows them in the test
// log), so a test can wait for a line, the server's own word that it has
// reached a step, instead of a timer.
type logWatch struct {
	tb testing.TB

	mu      sync.Mutex
	lines   []string
	watches []logWait
}

type logWait struct {
	sub string
	ch  chan struct{}
}

func (w *logWatch) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	w.tb.Log(line)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines = append(w.lines, line)
	kept := w.watches[:0]
	for _, wt := range w.watches {
		if strings.Contains(line, wt.sub) {
			close(wt.ch)
		} else {
			kept = append(kept, wt)
		}
	}
	w.watches = kept
	return len(p), nil
}

// wait is closed once a line containing sub has been logged.
func (w *logWatch) wait(sub string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	for _, l := range w.lines {
		if strings.Contains(l, sub) {
			close(ch)
			return ch
		}
	}
	w.watches = append(w.watches, logWait{sub: sub, ch: ch})
	return ch
}

// matching is every line logged so far containing sub.
func (w *logWatch) matching(sub string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, l := range w.lines {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// startWatched is startDefault with the server logging at INFO into a
// logWatch: apptest.Start, with the logger the test reads.
func startWatched(t *testing.T, driver string, change func(*config.Config)) (*server, *logWatch) {
	t.Helper()
	mx := smtptest.Start(t)
	cfg := baseConfig(t, driver, mx)
	if change != nil {
		change(&cfg)
	}
	return startWatchedConfig(t, cfg, mx)
}

// startWatchedConfig is startWatched on cfg as given, sending to mx.
func startWatchedConfig(t *testing.T, cfg config.Config, mx *smtptest.Server) (*server, *logWatch) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("test configuration invalid: %v", err)
	}
	lw := &logWatch{tb: t}
	a, err := app.New(context.Background(), cfg, logging.New(lw, slog.LevelInfo), "test")
	if err != nil {
		t.Fatalf("app.New: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Serve(ctx, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server shutdown: %v", err)
		}
	})
	s := &server{SMTP: mx, cfg: cfg}
	s.Server = &apptest.Server{URL: "http://" + l.Addr().String()} // stopped by the cleanup above
	return s, lw
}
