// Package testdb gives tests throwaway databases: a fresh, empty PostgreSQL
// database per call, dropped when the test ends, and SQLite files in the
// test's temporary directory.
//
// PostgreSQL is not optional. A test that needs it and cannot reach it fails
// with instructions to start it: a skipped test would let the PostgreSQL half
// of the store go untested without anyone noticing.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	// Registers the "pgx" database/sql driver.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// EnvURL names the variable that points tests at a PostgreSQL server. The
// role it names must be allowed to create databases.
const EnvURL = "NORNWEAVE_TEST_DATABASE_URL"

// DefaultURL is the server used when EnvURL is unset: a local PostgreSQL
// with trust authentication, as on a developer machine and in CI.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// connectTimeout bounds how long a missing server can stall a test before
// it fails with instructions.
const connectTimeout = 5 * time.Second

// PostgresURL returns the URL of a new, empty database (no migrations
// applied) on the server named by NORNWEAVE_TEST_DATABASE_URL, or
// DefaultURL. The database is dropped, with any connections still open to
// it, when the test and its subtests end. If PostgreSQL does not answer
// within a few seconds the test fails with how to start it; it is never
// skipped.
func PostgresURL(t testing.TB) string {
	t.Helper()
	base, u := baseURL(t)
	admin := connect(t, base)
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	name := databaseName(t)
	// name is generated here from [a-z0-9_] only (databaseName), so it
	// needs no quoting beyond the identifier quotes.
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`"`); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	dropAtCleanup(t, base, name)
	u.Path = "/" + name
	return u.String()
}

// baseURL is the server's URL from EnvURL, or DefaultURL.
func baseURL(t testing.TB) (string, *url.URL) {
	t.Helper()
	base := os.Getenv(EnvURL)
	if base == "" {
		base = DefaultURL
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		t.Fatalf("%s must be a postgres:// URL, got %q", EnvURL, redact(base))
	}
	return base, u
}

// connect opens an administrative connection to base, or fails the test
// with how to start PostgreSQL if it does not answer within connectTimeout.
func connect(t testing.TB, base string) *sql.DB {
	t.Helper()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("open %s: %v", redact(base), err)
	}
	// One connection: the callers run one statement at a time.
	admin.SetMaxOpenConns(1)
	ctx, cancel := context.WithTimeout(context.Background(), connectTimeout)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		t.Fatalf("PostgreSQL is not reachable at %s: %v. Start it with: "+
			"pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start  (or set %s)",
			redact(base), err, EnvURL)
	}
	return admin
}

// dropAtCleanup drops the database name, with any connections still open
// to it, when the test and its subtests end.
func dropAtCleanup(t testing.TB, base, name string) {
	t.Cleanup(func() {
		admin, err := sql.Open("pgx", base)
		if err != nil {
			t.Errorf("drop test database %s: %v", name, err)
			return
		}
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+name+`" WITH (FORCE)`); err != nil {
			t.Errorf("drop test database %s: %v", name, err)
		}
	})
}

// SQLitePath returns the path of a SQLite database file that does not exist
// yet, in the test's temporary directory.
func SQLitePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "nornweave.db")
}

// redact hides the password of a URL so that it never reaches test output.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "<unparsable URL>"
	}
	return u.Redacted()
}

// databaseName is a new database's name for t: nornweave_test_, the
// test's name as [a-z0-9_] (at most 38 of them, so that the name fits
// PostgreSQL's 63 bytes), and 8 random hex digits. pg_stat_activity and a
// leftover database then say which test they are of
// (scripts/test-timed.sh names the databases at its peak of connections).
func databaseName(t testing.TB) string {
	slug := []byte(strings.ToLower(t.Name()))
	for i, c := range slug {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			slug[i] = '_'
		}
	}
	return "nornweave_test_" + string(slug[:min(len(slug), 38)]) + "_" + randomHex(4)
}

func randomHex(n int) string {
	b := make([]byte, n)
	// crypto/rand.Read never fails; it crashes the program instead.
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
