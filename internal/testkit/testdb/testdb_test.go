package testdb

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"runtime"
	"strings"
	"testing"
)

func TestPostgresURLGivesEmptyDatabaseDroppedAfterTest(t *testing.T) {
	var name string
	t.Run("use", func(t *testing.T) {
		raw := PostgresURL(t)
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatalf("parse %q: %v", raw, err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		if !strings.HasPrefix(name, "nornweave_test_") {
			t.Fatalf("got database %q, want a nornweave_test_ name", name)
		}
		db := open(t, raw)
		var tables int
		if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = 'public'").Scan(&tables); err != nil {
			t.Fatalf("count tables: %v", err)
		}
		if tables != 0 {
			t.Errorf("got %d tables in a fresh database, want 0", tables)
		}
		if PostgresURL(t) == raw {
			t.Errorf("two calls returned the same database %q", raw)
		}
	})

	base := os.Getenv(EnvURL)
	if base == "" {
		base = DefaultURL
	}
	var n int
	if err := open(t, base).QueryRow("SELECT COUNT(*) FROM pg_database WHERE datname = $1", name).Scan(&n); err != nil {
		t.Fatalf("look for %s: %v", name, err)
	}
	if n != 0 {
		t.Errorf("database %s still exists after its test ended", name)
	}
}

func TestPostgresURLFailsWithHowToWhenUnreachable(t *testing.T) {
	// Port 1 on loopback refuses connections at once, standing in for a
	// PostgreSQL that is not running.
	t.Setenv(EnvURL, "postgres://postgres:s3cret@127.0.0.1:1/postgres?sslmode=disable")

	f := &fatalRecorder{TB: t}
	done := make(chan string)
	go func() {
		defer func() { done <- f.msg }()
		PostgresURL(f)
	}()
	msg := <-done

	for _, want := range []string{
		"PostgreSQL is not reachable at postgres://postgres:xxxxx@127.0.0.1:1/postgres",
		"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
		EnvURL,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("got failure %q, want it to contain %q", msg, want)
		}
	}
	if strings.Contains(msg, "s3cret") {
		t.Errorf("got failure %q, want the password redacted", msg)
	}
}

func TestSQLitePathIsNewFileInTempDir(t *testing.T) {
	p := SQLitePath(t)
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Errorf("got Stat(%q) error %v, want not-exist", p, err)
	}
	if q := SQLitePath(t); q == p {
		t.Errorf("two calls returned the same path %q", p)
	}
}

// fatalRecorder stands in for a testing.TB to capture what PostgresURL
// fails with, without failing the test that checks it.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	// Like the real Fatalf, stop the goroutine that called it.
	runtime.Goexit()
}

func open(t *testing.T, raw string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.PingContext(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	return db
}
