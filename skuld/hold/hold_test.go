package hold_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/nornweave/nornweave/skuld/hold"
	"github.com/nornweave/nornweave/store"
)

// River's tables are a schema of the store's database: migrated by the
// store's Migrate (so by `nornweave migrate`), and then current.
func TestSchemaMigratesAndIsCurrent(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(t.TempDir(), "nw.db"),
		Schemas: []store.Schema{hold.Schema(store.DriverSQLite)}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	pending, err := st.PendingMigrations(ctx)
	if err != nil || len(pending) == 0 || pending[len(pending)-1] != "river schema" {
		t.Fatalf("PendingMigrations = %v, %v; want the app's and then River's", pending, err)
	}
	if err := st.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if err := st.Ready(ctx); err != nil {
		t.Fatalf("Ready after Migrate: %v", err)
	}
}

// Stop is safe before Start and twice; a stopped queue does not start.
func TestQueueStopIsSafe(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	for i := range 2 {
		if err := q.Stop(ctx); err != nil {
			t.Fatalf("Stop #%d before Start: %v", i+1, err)
		}
	}
	if err := q.Start(ctx, nil); err == nil {
		t.Fatal("Start after Stop succeeded, want an error")
	}
}

// Ready is nil while River's client runs, and an error once it stopped.
func TestQueueReady(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t)
	if err := q.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := q.Ready(); err != nil {
		t.Fatalf("Ready while running: %v", err)
	}
	if err := q.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Ready(); err == nil {
		t.Fatal("Ready after Stop: nil, want an error")
	}
}

// newQueue is a Queue on a migrated SQLite store, closed with the test.
func newQueue(t *testing.T) *hold.Queue {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(t.TempDir(), "nw.db"),
		Schemas: []store.Schema{hold.Schema(store.DriverSQLite)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	q, err := hold.New(hold.Options{DB: st.SQL(), Driver: store.DriverSQLite, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	return q
}
