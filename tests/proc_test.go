package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// The built binary, shared by every test that runs the server as a real
// process: where a test restarts, kills or signals the server, it is the
// process a user runs, not an in-process stand-in.
var (
	binOnce sync.Once
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}

// nornweaveBinary builds the server once per test run, with -race when the
// test binary has it: the same flags reuse the packages compiled for the
// test binary instead of compiling everything a second time.
func nornweaveBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nornweave-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "nornweave")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../cmd/nornweave")...).CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// procEnv is the environment of a server process on a fresh database of
// driver, sending through smtp to mx, plus extra "KEY=value" settings. The
// same environment restarts the server on the same database. The database
// is a clone of a migrated template (apptest.Config's): the server finds
// its schema current and migrates nothing. Its PostgreSQL pool is as small
// as apptest's (DATABASE_MAX_CONNECTIONS; a server that does not know the
// variable ignores it), so that the processes of parallel tests fit in
// PostgreSQL's connections beside another test run.
func procEnv(t *testing.T, driver string, mx *smtptest.Server, extra ...string) []string {
	url := apptest.Config(t, driver).DatabaseURL
	return append(cleanEnv(), append([]string{"DB_DRIVER=" + driver, "DATABASE_URL=" + url,
		"EMAIL_PROVIDER=smtp", "EMAIL_DOMAIN=acme.test", "SMTP_HOST=" + mx.Host(),
		fmt.Sprintf("SMTP_PORT=%d", mx.Port()), "SMTP_USE_TLS=false", "HOST=127.0.0.1",
		"LOG_LEVEL=info", "DATABASE_MAX_CONNECTIONS=3", idlePoll}, extra...)...)
}

// idlePoll is a server process's poll for due held mail (apptest.Config's
// reason: half a core of an idle SQLite server under -race at the default);
// heldPoll, the default, is for the tests that time held mail: a later
// entry of an environment wins.
const (
	idlePoll = "HELD_POLL_INTERVAL=1s"
	heldPoll = "HELD_POLL_INTERVAL=50ms"
)

// proc is the server running as a child process.
type proc struct {
	*server
	cmd    *exec.Cmd
	exited chan error
	log    *syncBuffer
}

// startProc starts the binary with env on a free port and waits until it
// is healthy. The process is killed at the end of the test if still running.
func startProc(t *testing.T, env []string) *proc {
	t.Helper()
	cmd := exec.Command(nornweaveBinary(t))
	cmd.Dir = t.TempDir()
	// Port 0: the server binds a free port itself and logs it. A port
	// picked here and closed for the server to bind was, under load, taken
	// meanwhile by another test's listener: "address already in use".
	cmd.Env = append(env, "PORT=0")
	p := &proc{cmd: cmd, exited: make(chan error, 1), log: &syncBuffer{}, server: &server{Server: &apptest.Server{}}}
	cmd.Stdout, cmd.Stderr = p.log, p.log
	startUntilCleanup(t, cmd, p.exited, "server log", p.log)
	p.URL = "http://" + boundAddr(t, p.log, p.exited)
	waitHealthy(t, p.server, p.exited, p.log)
	return p
}

// boundAddr is the address a server started with PORT=0 logs that it
// listens on ("nornweave started", addr), waited for up to 30 s.
func boundAddr(t *testing.T, log *syncBuffer, exited <-chan error) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(log.String(), "\n") {
			var m struct{ Msg, Addr string }
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "nornweave started" && m.Addr != "" {
				return m.Addr
			}
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited before serving: %v\n%s", err, log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("server did not say where it listens within 30 s\n%s", log.String())
	return ""
}

// startUntilCleanup starts cmd, sends its end to exited, and at the end of
// the test kills it if still running and, if the test failed, logs what
// it wrote to log under title.
func startUntilCleanup(t *testing.T, cmd *exec.Cmd, exited chan error, title string, log *syncBuffer) {
	t.Helper()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("%s:\n%s", title, log.String())
		}
	})
}

// kill ends the process with SIGKILL, as a crash or an OOM killer would.
func (p *proc) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.exited
}

// terminate sends SIGTERM and returns the exit error once the process ends.
func (p *proc) terminate(t *testing.T) error {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

// wait returns the exit error once the process ends.
func (p *proc) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-p.exited:
		return err
	case <-time.After(90 * time.Second):
		t.Fatalf("server still running 90 s after SIGTERM\n%s", p.log.String())
		return nil
	}
}
