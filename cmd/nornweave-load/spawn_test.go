package main

import (
	"net"
	"slices"
	"strings"
	"testing"
)

// Not parallel: sets the process's environment.
func TestChildEnv(t *testing.T) {
	// A variable in the caller's shell must not reach the server.
	t.Setenv("GLOBAL_SEND_RATE_LIMIT_PER_HOUR", "1")
	t.Setenv("API_KEY", "from-the-shell")
	sink := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2525}
	tests := []struct {
		name    string
		cfg     spawnConfig
		want    []string
		notWant []string
	}{
		{
			name: "sqlite with sink",
			cfg:  spawnConfig{db: "sqlite", provider: "smtp", sinkAddr: sink, perMinute: 100},
			want: []string{"DB_DRIVER=sqlite", "DATABASE_URL=/tmp/run/nornweave.db", "EMAIL_PROVIDER=smtp",
				"SMTP_HOST=127.0.0.1", "SMTP_PORT=2525", "SMTP_USE_TLS=false", "EMAIL_DOMAIN=loadtest.test",
				"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=100", "GLOBAL_SEND_RATE_LIMIT_PER_HOUR=0",
				"LOG_LEVEL=warning", "HOST=127.0.0.1", "PORT=8123"},
			notWant: []string{"API_KEY=from-the-shell", "GLOBAL_SEND_RATE_LIMIT_PER_HOUR=1"},
		},
		{
			name: "postgres demo with key",
			cfg: spawnConfig{db: "postgres", databaseURL: "postgres://127.0.0.1/x", provider: "demo",
				perMinute: 10000000, apiKey: "k"},
			want:    []string{"DB_DRIVER=postgres", "DATABASE_URL=postgres://127.0.0.1/x", "EMAIL_PROVIDER=demo", "API_KEY=k"},
			notWant: []string{"SMTP_HOST=127.0.0.1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := childEnv(tt.cfg, "/tmp/run", 8123)
			for _, w := range tt.want {
				if !slices.Contains(env, w) {
					t.Errorf("env lacks %s; got %q", w, env)
				}
			}
			for _, nw := range tt.notWant {
				if slices.Contains(env, nw) {
					t.Errorf("env has %s, want it absent", nw)
				}
			}
		})
	}
}

func TestTailWriter(t *testing.T) {
	t.Parallel()
	var w tailWriter
	line := strings.Repeat("x", 99) + "\n"
	for range 100 {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Lines(); got != 100 {
		t.Errorf("lines = %d, want 100", got)
	}
	if got := len(w.Tail()); got != logTailSize {
		t.Errorf("tail is %d bytes, want %d", got, logTailSize)
	}
	if !strings.HasSuffix(w.Tail(), line) {
		t.Errorf("tail does not end with the last line")
	}
}
