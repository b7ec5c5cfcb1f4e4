package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
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
	code = run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

// Every configuration variable has its flag, and the flag's value reaches
// the variable: each is set on the command line and read back.
func TestEveryVariableHasItsFlag(t *testing.T) {
	t.Parallel()
	for _, v := range config.Vars() {
		inv, err := parseArgs([]string{"--" + v.Flag() + "=x1"})
		if err != nil {
			t.Errorf("--%s: %v", v.Flag(), err)
			continue
		}
		if inv.overrides[v.Name] != "x1" {
			t.Errorf("--%s=x1 set %s to %q", v.Flag(), v.Name, inv.overrides[v.Name])
		}
	}
}

// Flags may come before the command, after it, or both.
func TestParseArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		cmd  string
		port string
		dry  bool
	}{
		{nil, "serve", "", false},
		{[]string{"--port", "9000"}, "serve", "9000", false},
		{[]string{"--port", "9000", "check"}, "check", "9000", false},
		{[]string{"check", "--port=9000"}, "check", "9000", false},
		{[]string{"--port=1", "migrate", "--dry-run", "--port=2"}, "migrate", "2", true},
		{[]string{"--dry-run", "migrate"}, "migrate", "", true},
		{[]string{"--smtp-use-tls", "healthcheck"}, "healthcheck", "", false},
		{[]string{"--version"}, "version", "", false},
		{[]string{"-v"}, "version", "", false},
		{[]string{"help"}, "help", "", false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			inv, err := parseArgs(tt.args)
			if err != nil {
				t.Fatal(err)
			}
			if inv.cmd != tt.cmd || inv.overrides["PORT"] != tt.port || inv.dryRun != tt.dry {
				t.Errorf("got command %q, PORT %q, dry run %t; want %q, %q, %t", inv.cmd, inv.overrides["PORT"],
					inv.dryRun, tt.cmd, tt.port, tt.dry)
			}
		})
	}
}

// usageLacks names the variables whose flag line the usage lacks.
func usageLacks(usage string, vars []config.Var) []string {
	var missing []string
	for _, v := range vars {
		line := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(v.Flag()) + `(=\S*)?\s+` + v.Name + `$`)
		if !line.MatchString(usage) {
			missing = append(missing, v.Name)
		}
	}
	return missing
}

// --help lists every variable's flag, the throttle's (a nested struct of
// Config) included; and the check fails when a line goes.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestUsageListsEveryVariable(t *testing.T) {
	code, usage, _ := runIn(t, nil, "help")
	if code != 0 {
		t.Fatalf("help exit code = %d", code)
	}
	vars := config.Vars()
	if missing := usageLacks(usage, vars); len(missing) > 0 {
		t.Errorf("--help lacks the flags of %v:\n%s", missing, usage)
	}
	for _, w := range []string{"--throttle-backend=memory", "--throttle-fail=closed",
		"--redis-url=redis://127.0.0.1:6379/0", "--redis-key-prefix=nornweave:throttle"} {
		if !strings.Contains(usage, w) {
			t.Errorf("--help lacks %s", w)
		}
	}
	cut := regexp.MustCompile(`(?m)^  --throttle-fail.*\n`).ReplaceAllString(usage, "")
	if missing := usageLacks(cut, vars); !slices.Equal(missing, []string{"THROTTLE_FAIL"}) {
		t.Errorf("with --throttle-fail removed, usageLacks = %v, want [THROTTLE_FAIL]", missing)
	}
}

// A usage error is one line and a hint, not the whole usage; a bad value
// is a configuration error (exit 1), wherever the flag stands.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestFlagErrors(t *testing.T) {
	hint := "Run 'nornweave help' for the commands and flags."
	tests := []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"unknown flag", []string{"serve", "--prot", "9000"}, 2, []string{"nornweave: unknown flag --prot (did you mean --port?)", hint}},
		{"unknown flag before the command", []string{"--smtp-hots=mx", "check"}, 2, []string{"unknown flag --smtp-hots (did you mean --smtp-host?)"}},
		{"unknown command", []string{"chekc"}, 2, []string{`nornweave: unknown command "chekc" (did you mean check?)`, hint}},
		{"stray argument", []string{"serve", "now"}, 2, []string{`nornweave: unexpected argument "now"`, hint}},
		{"two commands", []string{"check", "migrate"}, 2, []string{`unexpected argument "migrate"`}},
		{"dry-run is migrate's", []string{"serve", "--dry-run"}, 2, []string{"--dry-run is a flag of migrate, not of serve"}},
		{"missing value", []string{"check", "--port"}, 2, []string{"nornweave: flag --port needs a value", hint}},
		{"bad integer", []string{"serve", "--port", "eighty"}, 1, []string{"nornweave: configuration error:", `PORT: cannot parse "eighty" as an integer`}},
		{"bad integer before the command", []string{"--port", "eighty", "migrate"}, 1, []string{`PORT: cannot parse "eighty" as an integer`}},
		{"bad boolean", []string{"serve", "--smtp-use-tls=maybe"}, 1, []string{`SMTP_USE_TLS: cannot parse "maybe" as a boolean`}},
		{"bad duration", []string{"serve", "--smtp-timeout=15"}, 1, []string{`SMTP_TIMEOUT: cannot parse "15" as a duration`}},
		{"bad flag of migrate", []string{"migrate", "--db-driver=mysql"}, 1, []string{`DB_DRIVER: unknown driver "mysql"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, nil, tt.args...)
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stderr: %s", code, tt.code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr = %q, want it to contain %q", stderr, w)
				}
			}
			if tt.code == 2 {
				if n := strings.Count(stderr, "\n"); n != 2 || strings.Contains(stderr, "Usage:") || stdout != "" {
					t.Errorf("a usage error wrote %d lines (want the error and the hint):\n%s%s", n, stderr, stdout)
				}
			}
		})
	}
}

// Every configuration problem is reported in one message, flags and
// environment alike.
// Not parallel: sets the process's environment or working directory, which run reads.
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

// Not parallel: sets the process's environment or working directory, which run reads.
func TestMigrateDryRunListsAndAppliesNothing(t *testing.T) {
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"migrate", "--dry-run"}, nil, &out, &errb); code != 0 {
		t.Fatalf("exit code = %d; stderr %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "pending: sqlite/0001_") {
		t.Errorf("stdout = %q, want the pending migrations", out.String())
	}
	out.Reset()
	run(context.Background(), []string{"migrate", "--dry-run"}, nil, &out, &errb)
	if !strings.Contains(out.String(), "pending: sqlite/0001_") {
		t.Errorf("a second dry run = %q: the first applied something", out.String())
	}
	pending := out.String()
	out.Reset()
	if code := run(context.Background(), []string{"migrate"}, nil, &out, &errb); code != 0 {
		t.Fatal(errb.String())
	}
	// migrate says what it applied: what the dry run listed.
	if got, want := out.String(), strings.ReplaceAll(pending, "pending: ", "applied: "); got != want {
		t.Errorf("migrate wrote %q, want %q", got, want)
	}
	for _, args := range [][]string{{"migrate", "--dry-run"}, {"migrate"}} {
		out.Reset()
		run(context.Background(), args, nil, &out, &errb)
		if got := out.String(); got != "nothing to apply: the database is up to date\n" {
			t.Errorf("after migrate, %s = %q, want nothing to apply", strings.Join(args, " "), got)
		}
	}
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// check prints its own lines on stdout and nothing else: no log line on
// stderr, no ./data left behind. Flags may come before the command.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestCheckAgainstReachableAndUnreachableSMTP(t *testing.T) {
	mx := smtptest.Start(t)
	closed := closedPort(t)
	tests := []struct {
		name string
		port int
		code int
		want []string
	}{
		{"reachable", mx.Port(), 0, []string{"ok    configuration\n",
			"ok    database sqlite ./data/nornweave.db (does not exist yet; serve or migrate creates it)\n",
			"ok    provider smtp 127.0.0.1", "ok    email domain acme.test\n"}},
		{"unreachable", closed, 1, []string{"ok    configuration", fmt.Sprintf("FAIL  provider smtp 127.0.0.1:%d: smtp: cannot connect to the SMTP server", closed),
			"connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runIn(t, map[string]string{"EMAIL_PROVIDER": "smtp", "SMTP_HOST": mx.Host(),
				"SMTP_USE_TLS": "false", "SMTP_TIMEOUT": "5s", "HOST": "127.0.0.1", "EMAIL_DOMAIN": "acme.test",
				"LOG_LEVEL": "debug"}, fmt.Sprintf("--smtp-port=%d", tt.port), "check")
			if code != tt.code {
				t.Fatalf("exit code = %d, want %d; stdout %s stderr %s", code, tt.code, stdout, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout = %q, want it to contain %q", stdout, w)
				}
			}
			if stderr != "" {
				t.Errorf("check wrote to stderr (want its own lines only, on stdout):\n%s", stderr)
			}
			if _, err := os.Stat("data"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("check left ./data behind (stat: %v)", err)
			}
		})
	}
}

// Not parallel: sets the process's environment or working directory, which run reads.
func TestCheckReportsAConfigurationError(t *testing.T) {
	code, stdout, stderr := runIn(t, map[string]string{"EMAIL_PROVIDER": "smtp"}, "check", "--port=70000")
	if code != 1 {
		t.Fatalf("exit code = %d, want 1", code)
	}
	if want := "FAIL  configuration:\n  "; !strings.HasPrefix(stdout, want) {
		t.Errorf("stdout = %q, want it to start with %q", stdout, want)
	}
	for _, w := range []string{"SMTP_HOST: is required", "PORT: 70000"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("stdout lacks %q:\n%s", w, stdout)
		}
	}
	if stderr != "" {
		t.Errorf("stderr = %q, want nothing", stderr)
	}
}

// A hosted provider's API base is reached (DNS, TCP, and TLS for https)
// and nothing is sent; each failure names its step. A real provider
// without EMAIL_DOMAIN is a warning, which does not fail the check.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestCheckReachesTheAPIBase(t *testing.T) {
	var requests atomic.Int32
	count := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { requests.Add(1) })
	plain := httptest.NewServer(count)
	defer plain.Close()
	tlsSrv := httptest.NewTLSServer(count)
	defer tlsSrv.Close()
	closed := closedPort(t)
	base := map[string]string{"EMAIL_PROVIDER": "mailgun", "MAILGUN_API_KEY": "key-1", "MAILGUN_DOMAIN": "mg.acme.test",
		"HOST": "127.0.0.1", "EMAIL_DOMAIN": "acme.test"}
	tests := []struct {
		name string
		env  map[string]string
		code int
		want []string
	}{
		{"http base", map[string]string{"MAILGUN_API_BASE": plain.URL}, 0, []string{
			"ok    provider mailgun " + plain.URL + " (DNS 1 address, TCP " + plain.Listener.Addr().String() +
				", no TLS (http); nothing sent: the key is first used by a send)\n"}},
		{"closed port", map[string]string{"MAILGUN_API_BASE": fmt.Sprintf("http://127.0.0.1:%d", closed)}, 1, []string{
			fmt.Sprintf("FAIL  provider mailgun http://127.0.0.1:%d: TCP: dial tcp 127.0.0.1:%d: connect: connection refused", closed, closed)}},
		{"untrusted certificate", map[string]string{"MAILGUN_API_BASE": tlsSrv.URL}, 1, []string{
			"FAIL  provider mailgun " + tlsSrv.URL + ": TLS: tls: failed to verify certificate"}},
		{"unknown host", map[string]string{"SENDGRID_API_BASE": "https://api.nornweave.invalid", "EMAIL_PROVIDER": "sendgrid",
			"SENDGRID_API_KEY": "k"}, 1, []string{"FAIL  provider sendgrid https://api.nornweave.invalid: DNS: lookup api.nornweave.invalid"}},
		{"no email domain", map[string]string{"MAILGUN_API_BASE": plain.URL, "EMAIL_DOMAIN": ""}, 0, []string{
			"WARN  email domain not set: POST /v1/inboxes answers 422 until EMAIL_DOMAIN names the domain mailgun sends from\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := maps.Clone(base)
			maps.Copy(env, tt.env)
			code, stdout, stderr := runIn(t, env, "check")
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
	if n := requests.Load(); n != 0 {
		t.Errorf("check made %d HTTP requests to the API, want none", n)
	}
}

// check says where SES's credentials come from.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestCheckSaysWhereSESCredentialsComeFrom(t *testing.T) {
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	if err := os.WriteFile(creds, []byte("[ops]\naws_access_key_id = AKIDTEST\naws_secret_access_key = s3cr3t\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()
	env := map[string]string{"EMAIL_PROVIDER": "ses", "SES_ENDPOINT": plain.URL, "HOST": "127.0.0.1",
		"EMAIL_DOMAIN": "acme.test", "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
		"AWS_SHARED_CREDENTIALS_FILE": creds, "AWS_CONFIG_FILE": filepath.Join(dir, "none"), "AWS_PROFILE": "ops",
		"AWS_EC2_METADATA_DISABLED": "true"}
	code, stdout, stderr := runIn(t, env, "check")
	want := "ok    credentials ses: no AWS_ACCESS_KEY_ID, so the AWS default credential chain: " +
		"the shared credentials file, profile ops (retrieved)\n"
	if code != 0 || !strings.Contains(stdout, want) {
		t.Errorf("exit %d, stdout %q; want it to contain %q (stderr %s)", code, stdout, want, stderr)
	}
	if strings.Contains(stdout, "s3cr3t") || strings.Contains(stdout, "AKIDTEST") {
		t.Errorf("a credential reached the output: %s", stdout)
	}
	env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"] = "AKIDENV", "envsecret"
	_, stdout, _ = runIn(t, env, "check")
	if want := "ok    credentials ses: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY\n"; !strings.Contains(stdout, want) {
		t.Errorf("stdout %q, want it to contain %q", stdout, want)
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
// Not parallel: sets the process's environment or working directory, which run reads.
func TestServeStartupAndShutdownLines(t *testing.T) {
	mx := smtptest.Start(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	t.Chdir(t.TempDir())
	prefix := redistest.Prefix(t)
	redisURL, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	redisURL.User = url.UserPassword("default", "hunter3") // Redis's nopass default user takes any password
	for k, v := range map[string]string{"EMAIL_PROVIDER": "smtp", "SMTP_HOST": mx.Host(),
		"SMTP_PORT": fmt.Sprint(mx.Port()), "SMTP_USE_TLS": "false", "SMTP_USERNAME": "agent", "SMTP_PASSWORD": "hunter2",
		"API_KEY": "sekrit", "EMAIL_DOMAIN": "acme.test", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE": "5",
		"GLOBAL_SEND_RATE_LIMIT_PER_HOUR": "100", "HOST": "0.0.0.0",
		"INBOX_SEND_RATE_LIMIT_PER_MINUTE": "2", "INBOX_SEND_RATE_LIMIT_PER_HOUR": "20",
		"OUTBOUND_DOMAIN_ALLOWLIST": `(.*\.)?acme\.test, example\.org`, "OUTBOUND_DOMAIN_BLOCKLIST": "",
		"CORS_ORIGINS": "https://app.acme.test", "THROTTLE_BACKEND": "redis", "THROTTLE_FAIL": "open",
		"REDIS_URL": redisURL.String(), "REDIS_KEY_PREFIX": prefix} {
		t.Setenv(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr lockedBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "--port", fmt.Sprint(port)}, nil, &stdout, &stderr) }()
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
	redisURL.User = nil
	want := map[string]any{"version": "dev", "addr": fmt.Sprintf("0.0.0.0:%d", port), "db_driver": "sqlite",
		"database": "./data/nornweave.db", "provider": "smtp", "smtp_host": "127.0.0.1", "email_domain": "acme.test",
		"limit_per_minute": 5.0, "limit_per_hour": 100.0, "api_key": true, "metrics_api_key": false,
		"inbox_limit_per_minute": 2.0, "inbox_limit_per_hour": 20.0,
		"domain_allowlist": []any{`(.*\.)?acme\.test`, `example\.org`}, "domain_blocklist": []any{},
		"cors_origins": []any{"https://app.acme.test"}, "throttle_backend": "redis", "throttle_fail": "open",
		"redis": strings.Replace(redisURL.String(), "://", "://…@", 1), "redis_key_prefix": prefix}
	for k, v := range want {
		if !reflect.DeepEqual(started[k], v) {
			t.Errorf("start-up line %s = %#v, want %#v", k, started[k], v)
		}
	}
	if s := stderr.String(); strings.Contains(s, "hunter2") || strings.Contains(s, "hunter3") || strings.Contains(s, "sekrit") {
		t.Errorf("a secret reached the log:\n%s", s)
	}
	if last["msg"] != "nornweave stopped" || last["sends_drained"] != 0.0 || last["clean"] != true {
		t.Errorf("last line = %v, want the shutdown report", last)
	}
	// Durations carry their unit in the key, not as bare nanoseconds.
	if _, ok := last["took_ms"].(float64); !ok || last["took"] != nil {
		t.Errorf("last line = %v, want took_ms in milliseconds", last)
	}
}

// Not parallel: sets the process's environment or working directory, which run reads.
func TestLogFormatText(t *testing.T) {
	code, _, stderr := runIn(t, map[string]string{"LOG_FORMAT": "text"}, "migrate")
	if code != 0 || !strings.Contains(stderr, `level=INFO msg="migrations applied"`) {
		t.Errorf("exit %d, stderr %q, want a text line", code, stderr)
	}
}

// Not parallel: sets the process's environment or working directory, which run reads.
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

// go-redis logs through a package-level logger that wrote plain lines to
// stderr; run routes it through slog, so under LOG_FORMAT=json its lines
// are JSON like every other.
// Not parallel: sets the process's environment or working directory, which run reads.
func TestRedisClientLogsThroughSlog(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("LOG_FORMAT", "json")
	var stdout, stderr lockedBuffer
	if code := run(context.Background(), []string{"migrate"}, nil, &stdout, &stderr); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, stderr.String())
	}
	before := stderr.String()
	// A sub-millisecond expiry is one line from go-redis, whatever the
	// server (none answers on this port).
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", closedPort(t)), MaxRetries: -1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.Set(ctx, "k", "v", 500*time.Microsecond)
	lines := strings.Split(strings.TrimSpace(strings.TrimPrefix(stderr.String(), before)), "\n")
	var found bool
	for _, raw := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatalf("a line after run is not JSON: %q", raw)
		}
		if m["msg"] == "redis client" && m["level"] == "WARN" && strings.Contains(fmt.Sprint(m["detail"]), "truncating to 1ms") {
			found = true
		}
	}
	if !found {
		t.Errorf("no JSON line from go-redis; after run, stderr has:\n%s", strings.Join(lines, "\n"))
	}
}

// In the image, the HEALTHCHECK's `nornweave healthcheck` runs beside the
// server (PID 1) with its environment but not its flags: it reads the
// server's --host and --port from PID 1's command line.
func TestHealthcheckReadsTheServersFlags(t *testing.T) {
	t.Parallel()
	dir, n := t.TempDir(), 0
	write := func(args ...string) string {
		n++
		p := filepath.Join(dir, fmt.Sprint("cmdline", n))
		if err := os.WriteFile(p, []byte(strings.Join(args, "\x00")+"\x00"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name    string
		cmdline string
		want    map[string]string
	}{
		{"flags after serve", write("/usr/local/bin/nornweave", "serve", "--port", "9000", "--host=127.0.0.2"),
			map[string]string{"PORT": "9000", "HOST": "127.0.0.2"}},
		{"flags before the default command", write("nornweave", "--port=9001", "--log-level", "debug"),
			map[string]string{"PORT": "9001"}},
		{"not a server", write("/usr/local/bin/nornweave", "migrate", "--port", "9000"), nil},
		{"not nornweave", write("/sbin/init", "--port", "9000"), nil},
		{"no such file", filepath.Join(dir, "missing"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := serverAddrFlags(tt.cmdline); !maps.Equal(got, tt.want) {
				t.Errorf("serverAddrFlags = %v, want %v", got, tt.want)
			}
		})
	}
}

// check pings a shared throttle backend, next to the database (issue 15,
// item 9): a Redis that does not answer is a FAIL line, one that does an
// ok line naming it (never its password).
// Not parallel: sets the process's environment or working directory, which run reads.
func TestCheckPingsTheThrottleBackend(t *testing.T) {
	closed := closedPort(t)
	for _, tt := range []struct {
		name, url, want string
		code            int
	}{
		{"reachable", redistest.URL(), "ok    throttle redis " + redisTarget(t, redistest.URL()) +
			" prefix nornweave:throttle (THROTTLE_FAIL=closed), maxmemory-policy noeviction\n", 0},
		{"unreachable", fmt.Sprintf("redis://:secret@127.0.0.1:%d/0", closed),
			fmt.Sprintf("FAIL  throttle redis 127.0.0.1:%d/0 prefix nornweave:throttle (THROTTLE_FAIL=closed):", closed), 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, _ := runIn(t, map[string]string{"THROTTLE_BACKEND": "redis", "REDIS_URL": tt.url,
				"HOST": "127.0.0.1"}, "check")
			if code != tt.code || !strings.Contains(stdout, tt.want) || strings.Contains(stdout, "secret") {
				t.Fatalf("check = %d:\n%s\nwant %d with %q, and no password", code, stdout, tt.code, tt.want)
			}
		})
	}
}

// redisTarget is how check names the Redis of raw: host:port/db (REDIS_URL
// is the tests' Redis, whatever database it names).
func redisTarget(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = "0"
	}
	return u.Host + "/" + db
}
