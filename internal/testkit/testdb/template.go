package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Migrate brings the empty database at url (a postgres:// URL, or a SQLite
// file path) to the current schema, and closes every connection it opened.
type Migrate func(ctx context.Context, url string) error

// A migrated database is built once and copied for each test: running every
// migration (the app's, River's, the throttle's) for each of about eighty
// test databases cost more than the tests themselves (issue 28). The
// PostgreSQL template is a database of its own, named by the key, kept
// between runs and shared by every test binary that asks for the same key;
// the key names the migrations (see SchemaKey), so a change of them makes
// another template. The SQLite template is a file per test binary.

// templates remembers, per key, the templates this process made sure of.
var templates sync.Map // key → *template

type template struct {
	once sync.Once
	name string // PostgreSQL: the template database; SQLite: the file
	err  error
}

// templatePrefix starts the name of every template database.
const templatePrefix = "nornweave_tpl_"

// PostgresMigratedURL returns the URL of a new database with the schema
// migrate makes, cloned (CREATE DATABASE … TEMPLATE) from a template built
// once for key. Like PostgresURL, it is dropped when the test ends, and the
// test fails if PostgreSQL does not answer. key must be made of [a-z0-9_]
// and end with SchemaKey.
func PostgresMigratedURL(t testing.TB, key string, migrate Migrate) string {
	t.Helper()
	base, u := baseURL(t)
	admin := connect(t, base)
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	name := databaseName(t)
	for attempt := 0; ; attempt++ {
		tp := ensureTemplate(ctx, admin, u, key, migrate)
		if tp.err != nil {
			t.Fatalf("template database for %s: %v", key, tp.err)
		}
		err := createFrom(ctx, admin, name, tp.name)
		if err == nil {
			break
		}
		// Dropped under us (another checkout's run cleans templates it
		// does not know): build it again, once.
		if attempt == 0 && sqlState(err) == "3D000" {
			templates.Delete(key)
			continue
		}
		t.Fatalf("create database %s from %s: %v", name, tp.name, err)
	}
	dropAtCleanup(t, base, name)
	u.Path = "/" + name
	return u.String()
}

// ensureTemplate makes sure, once per process, that the template database
// for key exists, building it under an advisory lock so that test binaries
// running at once build it once.
func ensureTemplate(ctx context.Context, admin *sql.DB, u *url.URL, key string, migrate Migrate) *template {
	v, _ := templates.LoadOrStore(key, &template{name: templatePrefix + key})
	tp := v.(*template)
	tp.once.Do(func() { tp.err = buildTemplate(ctx, admin, u, tp.name, migrate) })
	return tp
}

func buildTemplate(ctx context.Context, admin *sql.DB, u *url.URL, name string, migrate Migrate) error {
	conn, err := admin.Conn(ctx) // the advisory lock is the session's
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock(hashtext('nornweave test templates'))`); err != nil {
		return err
	}
	defer conn.ExecContext(context.Background(), `SELECT pg_advisory_unlock(hashtext('nornweave test templates'))`) //nolint:errcheck
	var exists bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	// Built under another name and renamed when whole, so that a run
	// killed mid-way leaves no template that looks ready.
	building := name + "_building"
	if _, err := conn.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+building+`" WITH (FORCE)`); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `CREATE DATABASE "`+building+`"`); err != nil {
		return err
	}
	bu := *u
	bu.Path = "/" + building
	if err := migrate(ctx, bu.String()); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	// The migration's connections have closed, but their server processes
	// may still be going away: PostgreSQL refuses to rename a database
	// anyone is connected to (55006) until they are gone.
	if err := whileInUse(ctx, func() error {
		_, err := conn.ExecContext(ctx, `ALTER DATABASE "`+building+`" RENAME TO "`+name+`"`)
		return err
	}); err != nil {
		return err
	}
	// Nobody connects to a template: a connection would make every clone
	// fail with 55006.
	if _, err := conn.ExecContext(ctx, `ALTER DATABASE "`+name+`" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`); err != nil {
		return err
	}
	// Templates of other migrations are left over from earlier checkouts:
	// drop those nobody is using (a drop that fails leaves one for later).
	// Templates of the same migrations (another part of the schema: the
	// store's, the throttle's) end with the same hash and stay.
	rows, err := conn.QueryContext(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'nornweave\_tpl\_%' AND datname <> $1`, name)
	if err != nil {
		return err
	}
	var stale []string
	for rows.Next() {
		var s string
		if rows.Scan(&s) == nil && !strings.HasSuffix(s, "_building") && schemaOf(s) != schemaOf(name) {
			stale = append(stale, s)
		}
	}
	rows.Close()
	for _, s := range stale {
		_, _ = conn.ExecContext(ctx, `ALTER DATABASE "`+s+`" IS_TEMPLATE false`)
		_, _ = conn.ExecContext(ctx, `DROP DATABASE IF EXISTS "`+s+`"`)
	}
	return nil
}

// createFrom creates the database name as a copy of template.
func createFrom(ctx context.Context, admin *sql.DB, name, template string) error {
	return whileInUse(ctx, func() error {
		_, err := admin.ExecContext(ctx, `CREATE DATABASE "`+name+`" TEMPLATE "`+template+`"`)
		return err
	})
}

// whileInUse runs f again while it fails because another session is on the
// database it needs alone (55006), for up to ten seconds.
func whileInUse(ctx context.Context, f func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil || sqlState(err) != "55006" || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// SQLiteMigratedPath returns the path of a SQLite file in the test's
// temporary directory with the schema migrate makes: a copy of a file
// migrated once per test binary and key.
func SQLiteMigratedPath(t testing.TB, key string, migrate Migrate) string {
	t.Helper()
	v, _ := templates.LoadOrStore("sqlite:"+key, &template{})
	tp := v.(*template)
	tp.once.Do(func() { tp.name, tp.err = sqliteTemplate(key, migrate) })
	if tp.err != nil {
		t.Fatalf("template SQLite file for %s: %v", key, tp.err)
	}
	path := SQLitePath(t)
	if err := copyFile(tp.name, path); err != nil {
		t.Fatalf("copy the SQLite template: %v", err)
	}
	return path
}

// sqliteTemplate returns the template file for key, kept between runs in
// the system's temporary directory (one file per key), building it if it
// is missing: migrated under a name of its own and renamed when whole.
func sqliteTemplate(key string, migrate Migrate) (string, error) {
	dir := filepath.Join(os.TempDir(), "nornweave-test-templates")
	path := filepath.Join(dir, key+".db")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	building := filepath.Join(dir, key+"."+randomHex(8)+".building")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := migrate(ctx, building); err != nil {
		return "", err
	}
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if _, err := os.Stat(building + suffix); err == nil {
			return "", fmt.Errorf("%s%s is left after the migration closed the database", building, suffix)
		}
	}
	return path, os.Rename(building, path)
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
