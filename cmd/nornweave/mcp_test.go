package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
)

// nornweave mcp checks only its own variables: it runs beside an agent,
// where the server's configuration is not (ENVIRONMENT=production without
// API_KEY would stop a server, not this). It fails at once, with what to
// do, when the server is not there, and writes nothing to stdout.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestMCPCommandFailsFast(t *testing.T) {
	tests := []struct {
		name   string
		env    map[string]string
		stderr string
	}{
		{"not a URL", map[string]string{"NORNWEAVE_API_URL": "localhost:8000"}, "NORNWEAVE_API_URL"},
		{"credentials in the URL", map[string]string{"NORNWEAVE_API_URL": "http://u:secret@localhost:8000"},
			"put the key in NORNWEAVE_API_KEY"},
		{"no server", map[string]string{"NORNWEAVE_API_URL": "http://127.0.0.1:1", "ENVIRONMENT": "production"},
			"cannot reach the NornWeave server at http://127.0.0.1:1/mcp"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, tt.env, "mcp")
			if code != 1 || stdout != "" || !strings.Contains(stderr, tt.stderr) || strings.Contains(stderr, "secret") {
				t.Errorf("exit %d, stdout %q, stderr %q; want 1, nothing, and %q", code, stdout, stderr, tt.stderr)
			}
		})
	}
}

// nornweave mcp against the real server: the agent sees the server's
// tools on stdio, its calls reach the server with the key, and closing
// stdin ends the command cleanly.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestMCPCommandForwardsToTheServer(t *testing.T) {
	cfg := apptest.Config(t, "sqlite")
	cfg.APIKey = "sekret"
	srv := apptest.Start(t, cfg)
	t.Chdir(t.TempDir())
	t.Setenv("NORNWEAVE_API_URL", srv.URL)
	t.Setenv("NORNWEAVE_API_KEY", "sekret")

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"mcp", "--log-level", "error"}, inR, outW, &stderr)
		outW.Close()
	}()
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v; stderr %s", err, stderr.String())
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_inbox",
		Arguments: map[string]any{"name": "Support", "username": "support"}})
	if err != nil || res.IsError {
		t.Fatalf("create_inbox over stdio: %v %+v", err, res)
	}
	if got := res.StructuredContent.(map[string]any)["email_address"]; got != "support@acme.test" {
		t.Errorf("email_address = %v", got)
	}
	cs.Close() // closes stdin
	if code := <-done; code != 0 {
		t.Errorf("exit code after stdin closed = %d; stderr %s", code, stderr.String())
	}
}
