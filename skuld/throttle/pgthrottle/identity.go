package pgthrottle

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Identity is the identity of a PostgreSQL throttle: a random value in the
// one row of pgthrottle_identity. The server that finds it missing while
// alone on its database writes it (Keep); the others only Read it.
type Identity struct{ db *sql.DB }

// NewIdentity returns the identity of the throttle in the database of db
// (Migrate has created its table).
func NewIdentity(db *sql.DB) Identity { return Identity{db: db} }

// Read returns the identity, or "" when none is written.
func (i Identity) Read(ctx context.Context) (string, error) {
	var v string
	err := i.db.QueryRowContext(ctx, `SELECT identity FROM pgthrottle_identity WHERE id = 1`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("pgthrottle: read identity: %w", err)
	}
	return v, nil
}

// Keep writes id unless an identity is already there, and returns the one
// there afterwards.
func (i Identity) Keep(ctx context.Context, id string) (string, error) {
	_, err := i.db.ExecContext(ctx, `INSERT INTO pgthrottle_identity (id, identity) VALUES (1, $1) ON CONFLICT DO NOTHING`, id)
	if err != nil {
		return "", fmt.Errorf("pgthrottle: keep identity: %w", err)
	}
	return i.Read(ctx)
}
