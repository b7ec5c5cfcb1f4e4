package pgthrottle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// ErrSchemaTooNew is a database whose throttle schema a newer release
// wrote: this binary's functions would not match its tables.
var ErrSchemaTooNew = errors.New("pgthrottle: the throttle schema is newer than this binary")

// migrateLock serializes appliers of several servers starting at once
// ("nornthrm"); distinct from the admission lock and the app's own.
const migrateLock int64 = 0x6e6f726e_7468726d

// Migrate brings the database's throttle schema to Version: it applies
// schema.sql in one transaction, under an advisory lock, unless the
// recorded version is already current. The project's migrate command and
// the server's start-up call it after the app's own migrations.
func Migrate(ctx context.Context, db *sql.DB) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("pgthrottle: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
		return fmt.Errorf("pgthrottle: migrate: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS pgthrottle_version (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("pgthrottle: migrate: %w", err)
	}
	v, err := version(ctx, tx)
	switch {
	case err != nil:
		return err
	case v > Version:
		return fmt.Errorf("%w (database %d, binary %d)", ErrSchemaTooNew, v, Version)
	case v == Version:
		return nil
	}
	if _, err := tx.ExecContext(ctx, schema); err != nil {
		return fmt.Errorf("pgthrottle: apply schema version %d: %w", Version, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM pgthrottle_version`); err != nil {
		return fmt.Errorf("pgthrottle: migrate: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO pgthrottle_version (version) VALUES ($1)`, Version); err != nil {
		return fmt.Errorf("pgthrottle: migrate: %w", err)
	}
	return tx.Commit()
}

// Current reports whether the database's throttle schema is at Version:
// what the server's readiness check asks.
func Current(ctx context.Context, db *sql.DB) (bool, error) {
	v, err := version(ctx, db)
	if err != nil {
		return false, err
	}
	return v == Version, nil
}

type queryer interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// version reads the recorded version, 0 for none.
func version(ctx context.Context, q queryer) (int, error) {
	var v sql.NullInt64
	err := q.QueryRowContext(ctx, `SELECT max(version) FROM pgthrottle_version`).Scan(&v)
	if err != nil {
		var missing bool
		if e := q.QueryRowContext(ctx, `SELECT to_regclass('pgthrottle_version') IS NULL`).Scan(&missing); e == nil && missing {
			return 0, nil
		}
		return 0, fmt.Errorf("pgthrottle: read schema version: %w", err)
	}
	return int(v.Int64), nil
}
