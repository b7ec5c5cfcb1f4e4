package tests

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// Issue 25's stdio items: `nornweave mcp` keeps its client past a bad
// line, and says a wrong key is a wrong key.

// TestBadInputMCPStdio: `nornweave mcp` answers a line that is not JSON
// with -32700 and keeps serving; a wrong key is reported as a wrong key.
func TestBadInputMCPStdio(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { c.APIKey = mcpKey })
	t.Run("a line that is not JSON", func(t *testing.T) { stdioReadsOn(t, s.URL) })
	t.Run("wrong key", func(t *testing.T) {
		wrong := exec.Command(nornweaveBinary(t), "mcp")
		wrong.Env = append(cleanEnv(), "NORNWEAVE_API_URL="+s.URL, "NORNWEAVE_API_KEY=not-the-key")
		out, err := wrong.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "401") || !strings.Contains(string(out), "NORNWEAVE_API_KEY") ||
			strings.Contains(string(out), "cannot reach") {
			t.Errorf("wrong key: %v, %s; want a failure saying the key is wrong, not that the server cannot be reached", err, out)
		}
	})
}

// stdioReadsOn runs `nornweave mcp` against url, sends it a line that is
// not JSON between two requests, and checks both requests are answered.
func stdioReadsOn(t *testing.T, url string) {
	cmd := exec.Command(nornweaveBinary(t), "mcp")
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "NORNWEAVE_API_URL="+url, "NORNWEAVE_API_KEY="+mcpKey)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	startUntilCleanup(t, cmd, exited, "nornweave mcp stderr", stderr)
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 16<<20)
	next := func() rpcAnswer {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended (%v); stderr: %s", lines.Err(), stderr.String())
		}
		var a rpcAnswer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			t.Fatalf("stdout line %q: %v", lines.Text(), err)
		}
		return a
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if a := next(); a.Result == nil {
		t.Fatalf("initialize: %+v", a)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `this is not JSON`)
	if a := next(); a.Error == nil || a.Error.Code != -32700 || string(a.ID) != "null" {
		t.Fatalf("a line that is not JSON: %+v, want -32700", a)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if a := next(); a.Result == nil || string(a.ID) != "2" || !bytes.Contains(a.Result, []byte("send_email")) {
		t.Fatalf("tools/list after the bad line: %+v", a)
	}
	stdin.Close()
	if err := <-exited; err != nil {
		t.Errorf("nornweave mcp exited with %v after stdin closed; stderr: %s", err, stderr.String())
	}
}
