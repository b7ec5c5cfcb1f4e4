package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/smtptest"
)

// runIn runs the command in a fresh directory (no stray .env; any SQLite
// database lands there) with env set for the test.
func runIn(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Chdir(t.TempDir())
	for k, v := range env {
		t.Setenv(k, v)
	}
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// Every configuration variable has its flag, and the flag's value reaches
// the variable: each is set on the command line and read back.
func TestEveryVariableHasItsFlag(t *testing.T) {
	for _, v := range config.Vars() {
		var overrides map[string]string
		var dryRun bool
		fs := newFlagSet("serve", &overrides, &dryRun)
		if err := fs.Parse([]string{"--" + v.Flag() + "=x1"}); err != nil {
			t.Errorf("--%s: %v", v.Flag(), err)
			continue
		}
		if overrides[v.Name] != "x1" {
			t.Errorf("--%s=x1 set %s to %q", v.Flag(), v.Name, overrides[v.Name])
		}
	}
}

func TestFlagErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown flag", []string{"serve", "--prot", "9000"}, 2, []string{"unknown flag --prot", "Usage: nornweave"}},
		{"stray argument", []string{"serve", "now"}, 2, []string{`unexpected argument "now"`, "Usage: nornweave"}},
		{"dry-run is migrate's", []string{"serve", "--dry-run"}, 2, []string{"unknown flag --dry-run", "Usage:"}},
		{"bad integer", []string{"serve", "--port", "eighty"}, 1, []string{"nornweave: configuration error:", `PORT: cannot parse "eighty" as an integer`}},
		{"bad boolean", []string{"serve", "--smtp-use-tls=maybe"}, 1, []string{`SMTP_USE_TLS: cannot parse "maybe" as a boolean`}},
		{"bad duration", []string{"serve", "--smtp-timeout=15"}, 1, []string{`SMTP_TIMEOUT: cannot parse "15" as a duration`}},
		{"bad value", []string{"check", "--log-format=xml"}, 1, []string{`LOG_FORMAT: unknown format "xml"`}},
		{"bad flag of migrate", []string{"migrate", "--db-driver=mysql"}, 1, []string{`DB_DRIVER: unknown driver "mysql"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runIn(t, nil, tt.args...)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, w)
				}
			}
		})
	}
}

// Every configuration problem is reported in one message, flags and
// environment alike.
func TestConfigurationErrorsAllAtOnce(t *testing.T) {
	code, _, stderr := runIn(t, map[string]string{
		"DB_DRIVER": "postgres", "DATABASE_URL": "mysql://db/x", "HOST": "not a host",
		"EMAIL_PROVIDER": "smtp", "OUTBOUND_DOMAIN_ALLOWLIST": "(acme", "GLOBAL_SEND_RATE_LIMIT_PER_HOUR": "lots",
	}, "serve", "--port=70000")
	if code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	if !strings.HasPrefix(stderr, "nornweave: configuration error:\n") {
		t.Errorf("stderr = %q, want the prefix first", stderr)
	}
	for _, w := range []string{"PORT: 70000", "HOST:", `DATABASE_URL: scheme "mysql"`, "SMTP_HOST: is required",
		`OUTBOUND_DOMAIN_ALLOWLIST: invalid pattern "(acme": missing closing )`,
		`GLOBAL_SEND_RATE_LIMIT_PER_HOUR: cannot parse "lots"`} {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr lacks %q:\n%s", w, stderr)
		}
	}
	if n := strings.Count(stderr, "nornweave: configuration error"); n != 1 {
		t.Errorf("prefix appears %d times, want one message", n)
	}
}

func TestMigrateDryRunListsAndAppliesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"migrate", "--dry-run"}, &out, &errb); code != 0 {
		t.Fatalf("exit code = %d; stderr %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "pending: sqlite/0001_") {
		t.Errorf("stdout = %q, want the pending migrations", out.String())
	}
	out.Reset()
	run(context.Background(), []string{"migrate", "--dry-run"}, &out, &errb)
	if !strings.Contains(out.String(), "pending: sqlite/0001_") {
		t.Errorf("a second dry run = %q: the first applied something", out.String())
	}
	if code := run(context.Background(), []string{"migrate"}, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	out.Reset()
	run(context.Background(), []string{"migrate", "--dry-run"}, &out, &errb)
	if !strings.Contains(out.String(), "nothing to apply") {
		t.Errorf("after migrate, dry run = %q, want nothing to apply", out.String())
	}
}

func TestCheckAgainstReachableAndUnreachableSMTP(t *testing.T) {
	mx := smtptest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().(*net.TCPAddr).Port
	l.Close()
	tests := []struct {
		name string
		port int
		code int
		want []string
	}{
		{"reachable", mx.Port(), 0, []string{"ok    configuration", "ok    database sqlite", "ok    provider smtp 127.0.0.1"}},
		{"unreachable", closed, 1, []string{"ok    configuration", fmt.Sprintf("FAIL  provider smtp 127.0.0.1:%d: smtp: cannot connect to the SMTP server", closed),
			"connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, map[string]string{"EMAIL_PROVIDER": "smtp", "SMTP_HOST": mx.Host(),
				"SMTP_USE_TLS": "false", "SMTP_TIMEOUT": "5s", "HOST": "127.0.0.1"}, "check", fmt.Sprintf("--smtp-port=%d", tt.port))
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stdout %s stderr %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout = %q, want it to contain %q", stdout, w)
				}
			}
		})
	}
}

// lockedBuffer is a bytes.Buffer the server writes while the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// serve --port listens on that port (it used to listen on 8000 whatever
// the flag said); the start-up line names everything an operator checks,
// never a secret; the last line says what shutdown drained.
func TestServeStartupAndShutdownLines(t *testing.T) {
	mx := smtptest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t.Chdir(t.TempDir())
	for k, v := range map[string]string{"EMAIL_PROVIDER": "smtp", "SMTP_HOST": mx.Host(),
		"SMTP_PORT": fmt.Sprint(mx.Port()), "SMTP_USE_TLS": "false", "SMTP_USERNAME": "agent", "SMTP_PASSWORD": "hunter2",
		"API_KEY": "sekrit", "EMAIL_DOMAIN": "acme.test", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE": "5",
		"GLOBAL_SEND_RATE_LIMIT_PER_HOUR": "100", "HOST": "127.0.0.1"} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--port", fmt.Sprint(port)}, &stdout, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(stderr.String(), "nornweave started") {
		select {
		case code := <-done:
			t.Fatalf("exited with %d before starting:\n%s", code, stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no start-up line in 20 s:\n%s", stderr.String())
		}
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("exit code = %d:\n%s", code, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var started, last map[string]any
	for _, raw := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("log line %q is not JSON: %v", raw, err)
		}
		if m["msg"] == "nornweave started" {
			started = m
		}
		last = m
	}
	want := map[string]any{"version": "dev", "addr": fmt.Sprintf("127.0.0.1:%d", port), "db_driver": "sqlite",
		"database": "./data/nornweave.db", "provider": "smtp", "smtp_host": "127.0.0.1", "email_domain": "acme.test",
		"limit_per_minute": 5.0, "limit_per_hour": 100.0, "api_key": true, "metrics_api_key": false}
	for k, v := range want {
		if started[k] != v {
			t.Errorf("start-up line %s = %v, want %v", k, started[k], v)
		}
	}
	if s := stderr.String(); strings.Contains(s, "hunter2") || strings.Contains(s, "sekrit") {
		t.Errorf("a secret reached the log:\n%s", s)
	}
	if last["msg"] != "nornweave stopped" || last["sends_drained"] != 0.0 || last["clean"] != true {
		t.Errorf("last line = %v, want the shutdown report", last)
	}
}

func TestLogFormatText(t *testing.T) {
	code, _, stderr := runIn(t, map[string]string{"LOG_FORMAT": "text"}, "migrate")
	if code != 0 || !strings.Contains(stderr, `level=INFO msg="migrations applied"`) {
		t.Errorf("exit %d, stderr %q, want a text line", code, stderr)
	}
}

func TestHealthcheckCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/health" {
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	if code, _, stderr := runIn(t, nil, "healthcheck", fmt.Sprintf("--port=%d", port)); code != 0 {
		t.Errorf("healthcheck against a healthy server = %d: %s", code, stderr)
	}
	srv.Close()
	if code, _, _ := runIn(t, nil, "healthcheck", fmt.Sprintf("--port=%d", port)); code != 1 {
		t.Errorf("healthcheck against nothing = %d, want 1", code)
	}
}
