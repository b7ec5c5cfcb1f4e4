package store

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testdb"
)

// With the database shared, an inbox changed by another server (another
// Store) is seen at once by Inbox; CachedInbox may serve the copy from
// before, stamped with a version that the change moved (migration 0006's
// trigger), so the shared throttle can tell it is stale.
func TestShareDatabaseSeesOtherWriters(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.PostgresURL(t)
	open := func() *Store {
		s, err := Open(ctx, Options{Driver: DriverPostgres, DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b := open(), open()
	if err := a.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	version := func(ctx context.Context) (string, error) {
		var v string
		err := b.sqlDB.QueryRowContext(ctx, `SELECT v::TEXT FROM inbox_version`).Scan(&v)
		return v, err
	}
	b.ShareDatabase(version)
	in := mustCreateInbox(t, a, "a@example.com")
	before, err := b.CachedInbox(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := version(ctx); before.Version != v {
		t.Fatalf("copy stamped %q, version is %q", before.Version, v)
	}
	n := 3
	if _, err := a.UpdateInbox(ctx, in.ID, InboxChanges{SetPerMinute: true, PerMinute: &n}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inbox(ctx, in.ID)
	if err != nil || got.RateLimitPerMinute == nil || *got.RateLimitPerMinute != 3 {
		t.Fatalf("the other server reads %+v, %v; want per-minute 3", got, err)
	}
	if got.Version == before.Version {
		t.Fatalf("the change left the version at %q", got.Version)
	}
	cached, err := b.CachedInbox(ctx, in.ID)
	if err != nil || cached.Version != got.Version || *cached.RateLimitPerMinute != 3 {
		t.Fatalf("after a read the cache holds %+v, %v; want the copy just read", cached, err)
	}
	if err := a.DeleteInbox(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if v, _ := version(ctx); v == got.Version {
		t.Fatal("deleting the inbox left the version where it was")
	}
}
