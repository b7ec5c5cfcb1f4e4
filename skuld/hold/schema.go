package hold

import (
	"context"
	"database/sql"
	"log/slog"

	"github.com/riverqueue/river/rivermigrate"

	"github.com/nornweave/nornweave/store"
)

// Schema is River's tables as a part of the store's database: migrated
// by River's own migrator, after the app's migrations, by the same
// command (store.Options.Schemas).
func Schema(driver string) store.Schema {
	migrator := func(db *sql.DB) (*rivermigrate.Migrator[*sql.Tx], error) {
		return rivermigrate.New(driverOf(db, driver), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	}
	return store.Schema{
		Name: "river",
		Migrate: func(ctx context.Context, db *sql.DB) error {
			m, err := migrator(db)
			if err != nil {
				return err
			}
			if driver == store.DriverPostgres {
				// Servers starting together take turns, as for the app's
				// migrations. River applies each version in a transaction
				// of its own (one that adds an enum value cannot share it
				// with one that uses it), so the lock is a session's, held
				// on a connection of its own while the pool migrates.
				conn, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", riverMigrateLock); err != nil {
					return err
				}
				defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", riverMigrateLock) //nolint:errcheck // closing the session unlocks too
			}
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
			return err
		},
		Current: func(ctx context.Context, db *sql.DB) (bool, error) {
			m, err := migrator(db)
			if err != nil {
				return false, err
			}
			existing, err := m.ExistingVersions(ctx)
			if err != nil {
				if ctx.Err() != nil {
					// Out of time: the database did not answer, which
					// says nothing of its schema.
					return false, err
				}
				// No river_migration table yet: not current.
				return false, nil //nolint:nilerr // an empty database is simply not migrated
			}
			all := m.AllVersions()
			return len(existing) > 0 && existing[len(existing)-1].Version == all[len(all)-1].Version, nil
		},
	}
}

// riverMigrateLock serializes River's migrations among servers starting
// at once; arbitrary, but it must never change.
const riverMigrateLock int64 = 0x6e6f726e72697672 // "nornrivr"
