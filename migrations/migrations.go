// Package migrations holds the database schema as numbered SQL files, one
// directory per dialect, embedded in the binary and applied in order at
// start-up.
//
// A file is named NNNN_description.sql; NNNN is its version. Each file is
// applied in its own transaction together with its row in schema_migrations,
// so a failed migration leaves the database at the previous version. A
// database whose version is newer than any file this binary knows was
// migrated by a newer release, and the server refuses to run on it rather
// than guess at a schema it has never seen.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Dialects understood by Apply and Status.
const (
	Postgres = "postgres"
	SQLite   = "sqlite"
)

// ErrSchemaTooNew reports a database migrated by a newer release than this
// binary. Running on it could corrupt data the newer schema relies on.
var ErrSchemaTooNew = errors.New("migrations: database schema is newer than this binary")

// lockKey is the PostgreSQL advisory lock that serializes appliers, so two
// servers starting at once do not both run the same migration. Its value is
// arbitrary but must never change.
const lockKey int64 = 0x6e6f726e77656176 // "nornweav"

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// migration is one numbered SQL file.
type migration struct {
	version int
	name    string
	sql     string
}

// Apply applies every migration newer than the database's version, in
// order, each in its own transaction together with its row in
// schema_migrations. dialect is "postgres" or "sqlite". On PostgreSQL
// concurrent appliers are serialized with pg_advisory_xact_lock, so it is
// safe for several servers to call Apply on the same database at once.
//
// Apply returns an error wrapping ErrSchemaTooNew when the database is at a
// version this binary does not know.
func Apply(ctx context.Context, db *sql.DB, dialect string) error {
	_, err := ApplyListed(ctx, db, dialect)
	return err
}

// ApplyListed is Apply, and names the migrations this call applied
// ("sqlite/0002_idempotency.sql"), in order: none when the database was
// current, or another applier got there first. On an error, the list has
// those applied before it.
func ApplyListed(ctx context.Context, db *sql.DB, dialect string) ([]string, error) {
	ms, err := load(dialect)
	if err != nil {
		return nil, err
	}
	return apply(ctx, db, dialect, ms)
}

// apply is ApplyListed over a given list of migrations, sorted by version.
func apply(ctx context.Context, db *sql.DB, dialect string, ms []migration) ([]string, error) {
	var applied []string
	for {
		name, err := applyNext(ctx, db, dialect, ms)
		if err != nil || name == "" {
			return applied, err
		}
		applied = append(applied, name)
	}
}

// applyNext applies the first migration newer than the database, in one
// transaction, and returns its name; "" when there was none. The version
// is read inside the transaction, after the lock, so an applier that
// waited for another sees that one's work and skips it.
func applyNext(ctx context.Context, db *sql.DB, dialect string, ms []migration) (name string, err error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("migrations: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()

	if dialect == Postgres {
		if _, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return "", fmt.Errorf("migrations: lock: %w", err)
		}
	}
	if _, err := tx.ExecContext(ctx, createVersionTable(dialect)); err != nil {
		return "", fmt.Errorf("migrations: create schema_migrations: %w", err)
	}
	current, err := currentVersion(ctx, tx)
	if err != nil {
		return "", err
	}
	latest := ms[len(ms)-1].version
	if current > latest {
		return "", fmt.Errorf("%w: database is at version %d, this binary knows up to %d", ErrSchemaTooNew, current, latest)
	}

	i := sort.Search(len(ms), func(i int) bool { return ms[i].version > current })
	if i == len(ms) {
		return "", commit(tx)
	}
	m := ms[i]
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return "", fmt.Errorf("migrations: apply %s: %w", m.name, err)
	}
	// The version comes from a file name parsed as an integer, so formatting
	// it into the statement is safe and spares a per-dialect placeholder.
	insert := fmt.Sprintf("INSERT INTO schema_migrations (version) VALUES (%d)", m.version)
	if _, err := tx.ExecContext(ctx, insert); err != nil {
		return "", fmt.Errorf("migrations: record %s: %w", m.name, err)
	}
	return m.name, commit(tx)
}

func commit(tx *sql.Tx) error {
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrations: commit: %w", err)
	}
	return nil
}

// Status reports the database's version (0 for an empty database) and the
// latest version this binary knows. It does not change the database.
func Status(ctx context.Context, db *sql.DB, dialect string) (current, latest int, err error) {
	ms, err := load(dialect)
	if err != nil {
		return 0, 0, err
	}
	latest = ms[len(ms)-1].version

	var exists bool
	switch dialect {
	case Postgres:
		err = db.QueryRowContext(ctx, "SELECT to_regclass('schema_migrations') IS NOT NULL").Scan(&exists)
	case SQLite:
		err = db.QueryRowContext(ctx, "SELECT COUNT(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").Scan(&exists)
	}
	if err != nil {
		return 0, latest, fmt.Errorf("migrations: look for schema_migrations: %w", err)
	}
	if !exists {
		return 0, latest, nil
	}
	current, err = currentVersion(ctx, db)
	return current, latest, err
}

// Pending lists the migrations Apply would apply, by file name
// ("sqlite/0002_idempotency.sql"), in order. It does not change the
// database. A database newer than this binary is ErrSchemaTooNew, as in Apply.
func Pending(ctx context.Context, db *sql.DB, dialect string) ([]string, error) {
	current, latest, err := Status(ctx, db, dialect)
	if err != nil {
		return nil, err
	}
	if current > latest {
		return nil, fmt.Errorf("migrations: database at version %d, this binary knows %d: %w", current, latest, ErrSchemaTooNew)
	}
	ms, err := load(dialect)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, m := range ms {
		if m.version > current {
			names = append(names, m.name)
		}
	}
	return names, nil
}

// queryer is what currentVersion needs from a *sql.DB or a *sql.Tx.
type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func currentVersion(ctx context.Context, q queryer) (int, error) {
	var v int
	if err := q.QueryRowContext(ctx, "SELECT COALESCE(MAX(version), 0) FROM schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("migrations: read version: %w", err)
	}
	return v, nil
}

func createVersionTable(dialect string) string {
	if dialect == Postgres {
		return `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`
	}
	return `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    INTEGER PRIMARY KEY,
	applied_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
)`
}

// load reads the dialect's migrations sorted by version. A badly named or
// duplicated file is a build mistake; it is reported rather than skipped so
// that it cannot silently leave a table out.
func load(dialect string) ([]migration, error) {
	if dialect != Postgres && dialect != SQLite {
		return nil, fmt.Errorf("migrations: unknown dialect %q (want %q or %q)", dialect, Postgres, SQLite)
	}
	entries, err := fs.ReadDir(files, dialect)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migrations: %s/%s: name must start with a positive version and an underscore", dialect, name)
		}
		b, err := fs.ReadFile(files, path.Join(dialect, name))
		if err != nil {
			return nil, fmt.Errorf("migrations: %w", err)
		}
		ms = append(ms, migration{version: v, name: dialect + "/" + name, sql: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("migrations: no migrations for %s", dialect)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations: %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}
