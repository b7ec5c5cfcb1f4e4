package skuld_test

import (
	"context"
	"database/sql"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/migrations"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttletest"
)

// TestPostgresThrottleConformance runs the backend conformance suite on the
// real PostgreSQL, a fresh database per case. Two throttles of one case
// have separate connection pools, like two servers.
func TestPostgresThrottleConformance(t *testing.T) {
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		url := testdb.PostgresURL(t)
		migrate(t, url)
		var offset atomic.Int64
		return throttletest.Backend{
			New: func(global, inbox skuld.Limits) skuld.Throttle {
				db := openDB(t, url)
				return skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: global, Inbox: inbox,
					ClockOffset: func() time.Duration { return time.Duration(offset.Load()) }})
			},
			Advance: func(d time.Duration) { offset.Add(int64(d)) },
			Margin:  skuld.DefaultLeaseMargin,
			// The trigger of migration 0006 moves the version with the
			// change; a statement that changes no row moves it too.
			ChangeInbox: func() {
				if _, err := openDB(t, url).Exec(`UPDATE inboxes SET name = name WHERE false`); err != nil {
					t.Fatal(err)
				}
			},
			Shared: true,
		}
	})
}

func openDB(t testing.TB, url string) *sql.DB {
	t.Helper()
	db, err := skuld.OpenPostgresThrottleDB(url, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func migrate(t *testing.T, url string) {
	t.Helper()
	if err := migrateDB(openDB(t, url)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

func migrateDB(db *sql.DB) error {
	return migrations.Apply(context.Background(), db, migrations.Postgres)
}
