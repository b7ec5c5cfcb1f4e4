package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
)

// TestBinaryServesAndShutsDownGracefully runs the nornweave binary as a
// newcomer would — no configuration at all — sends through it, then stops it
// with SIGTERM and expects a clean exit.
func TestBinaryServesAndShutsDownGracefully(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := nornweaveBinary(t) // built once for every test that runs the binary
	port := freePort(t)
	cmd := exec.Command(bin)
	cmd.Dir = dir
	cmd.Env = append(cleanEnv(), "HOST=127.0.0.1", fmt.Sprintf("PORT=%d", port))
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	})

	s := &server{Server: &apptest.Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port)}}
	waitHealthy(t, s, exited, &stderr)
	inbox := s.createInbox(t, "support")
	r := s.send(t, inbox, "ann@example.com")
	mustStatus(t, r, http.StatusCreated)
	if st := r.JSON(t)["status"]; st != "sent" {
		t.Fatalf("demo send status = %v, want sent", st)
	}
	if _, err := os.Stat(filepath.Join(dir, "data", "nornweave.db")); err != nil {
		t.Errorf("embedded database not created: %v", err)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("server still running 30 s after SIGTERM\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("log does not mention the shutdown:\n%s", stderr.String())
	}
}

// cleanEnv is the test's environment without NornWeave's own variables, so
// the binary runs on its defaults.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOST", "PORT", "DB_DRIVER", "DATABASE_URL", "EMAIL_PROVIDER", "EMAIL_DOMAIN", "API_KEY",
			"ENVIRONMENT", "LOG_LEVEL", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", "GLOBAL_SEND_RATE_LIMIT_PER_HOUR",
			"OUTBOUND_DOMAIN_ALLOWLIST", "OUTBOUND_DOMAIN_BLOCKLIST", "THROTTLE_BACKEND", "THROTTLE_FAIL", "REDIS_URL", "REDIS_KEY_PREFIX":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// waitHealthy polls /health until the binary answers, failing early if it exits.
func waitHealthy(t *testing.T, s *server, exited <-chan error, log *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("server exited before serving: %v\n%s", err, log.String())
		default:
		}
		res, err := http.Get(s.URL + "/health")
		if err == nil {
			var body map[string]string
			json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK && body["status"] == "ok" {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("server not healthy after 30 s\n%s", log.String())
}

// syncBuffer is a bytes.Buffer safe to write from the process and read from the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
