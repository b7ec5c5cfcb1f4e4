package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	// healthLimit bounds start-up, migrations on PostgreSQL included.
	healthLimit = 60 * time.Second
	// stopLimit is how long a SIGTERMed server may drain before it is
	// killed; the server itself gives in-flight requests 90 s.
	stopLimit = 100 * time.Second
	// logTailSize is how much of a failing server's log is kept to show.
	logTailSize = 4 << 10
)

// spawnConfig is a server to start as a child process.
type spawnConfig struct {
	binary      string
	db          string
	databaseURL string
	provider    string
	sinkAddr    *net.TCPAddr // nil without a sink
	perMinute   int
	perHour     int
	apiKey      string
	extraEnv    []string // KEY=VALUE, after the defaults
	logFile     string   // where the whole log is written too ("": nowhere)
}

// child is a running server process.
type child struct {
	cmd     *exec.Cmd
	dir     string
	log     *tailWriter
	exited  chan struct{}
	waitErr error
	URL     string
}

// childEnv is the whole environment of the spawned server. It starts from
// nothing but PATH, HOME and TMPDIR, so a NornWeave variable left in the
// caller's shell cannot change what is measured.
func childEnv(c spawnConfig, dir string, port int) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	dbURL := c.databaseURL
	if c.db == "sqlite" && dbURL == "" {
		dbURL = filepath.Join(dir, "nornweave.db")
	}
	env = append(env,
		"DB_DRIVER="+c.db,
		"DATABASE_URL="+dbURL,
		"EMAIL_PROVIDER="+c.provider,
		"EMAIL_DOMAIN=loadtest.test",
		"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE="+strconv.Itoa(c.perMinute),
		"GLOBAL_SEND_RATE_LIMIT_PER_HOUR="+strconv.Itoa(c.perHour),
		"LOG_LEVEL=warning",
		"HOST=127.0.0.1",
		"PORT="+strconv.Itoa(port),
	)
	env = append(env, c.extraEnv...)
	if c.sinkAddr != nil {
		env = append(env, "SMTP_HOST="+c.sinkAddr.IP.String(),
			"SMTP_PORT="+strconv.Itoa(c.sinkAddr.Port), "SMTP_USE_TLS=false")
	}
	if c.apiKey != "" {
		env = append(env, "API_KEY="+c.apiKey)
	}
	return env
}

// spawn starts the server in a fresh temporary directory (so its SQLite file
// is new and no .env applies) and waits until GET /health answers. Its log
// is counted and only its tail kept: at LOG_LEVEL=warning every 429 is a
// line, and a long run must not fill a disk with them.
func spawn(ctx context.Context, c spawnConfig) (*child, error) {
	bin, err := filepath.Abs(c.binary)
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nornweave-load-")
	if err != nil {
		return nil, err
	}
	ch := &child{dir: dir, log: &tailWriter{}, exited: make(chan struct{}),
		URL: "http://127.0.0.1:" + strconv.Itoa(port)}
	// Not CommandContext: an interrupted run still stops the server with
	// SIGTERM in stop, as a user would.
	ch.cmd = exec.Command(bin, "serve")
	ch.cmd.Dir, ch.cmd.Env = dir, childEnv(c, dir, port)
	var out io.Writer = ch.log
	var logFile *os.File
	if c.logFile != "" {
		if logFile, err = os.Create(c.logFile); err != nil {
			ch.cleanup()
			return nil, err
		}
		out = io.MultiWriter(ch.log, logFile)
	}
	ch.cmd.Stdout, ch.cmd.Stderr = out, out
	if err := ch.cmd.Start(); err != nil {
		ch.cleanup()
		if logFile != nil {
			logFile.Close()
		}
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		ch.waitErr = ch.cmd.Wait() // returns once the log is copied
		if logFile != nil {
			logFile.Close()
		}
		close(ch.exited)
	}()
	if err := ch.waitHealthy(ctx); err != nil {
		ch.stop()
		ch.cleanup()
		return nil, fmt.Errorf("%w; end of the server log:\n%s", err, ch.log.Tail())
	}
	return ch, nil
}

// freePort asks the kernel for a free loopback port. Another process could
// take it before the server binds it; the health check then fails loudly.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (ch *child) waitHealthy(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, healthLimit)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, ch.URL+"/health", nil)
		if res, err := hc.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ch.exited:
			return fmt.Errorf("server exited before it was healthy: %v", ch.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("server not healthy after %s: %w", healthLimit, ctx.Err())
		case <-tick.C:
		}
	}
}

// stop SIGTERMs the server, waits for it (killing it after stopLimit) and
// returns its exit code (-1 if a signal ended it). Call it once.
func (ch *child) stop() int {
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.exited:
	case <-time.After(stopLimit):
		_ = ch.cmd.Process.Kill()
		<-ch.exited
	}
	code := 0
	var ee *exec.ExitError
	if errors.As(ch.waitErr, &ee) {
		code = ee.ExitCode()
	} else if ch.waitErr != nil {
		code = -1
	}
	return code
}

// cpu is the CPU time the server used, once it has stopped.
func (ch *child) cpu() time.Duration {
	if ps := ch.cmd.ProcessState; ps != nil {
		return ps.UserTime() + ps.SystemTime()
	}
	return 0
}

// cleanup removes the server's directory, its database and log included.
func (ch *child) cleanup() { os.RemoveAll(ch.dir) }

// tailWriter counts the lines written to it and keeps the last
// logTailSize bytes. It is safe for concurrent use.
type tailWriter struct {
	mu    sync.Mutex
	buf   []byte
	lines int
}

// Write implements io.Writer.
func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.lines += bytes.Count(p, []byte{'\n'})
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - logTailSize; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns the last bytes written.
func (w *tailWriter) Tail() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}

// Lines returns the number of lines written.
func (w *tailWriter) Lines() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.lines
}
