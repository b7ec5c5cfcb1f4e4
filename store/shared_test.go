package store

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testdb"
)

// With the database shared, an inbox changed by another server (another
// Store) is seen at once.
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
	b.ShareDatabase()
	in := mustCreateInbox(t, a, "a@example.com")
	if _, err := b.Inbox(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	n := 3
	if _, err := a.UpdateInbox(ctx, in.ID, InboxChanges{SetPerMinute: true, PerMinute: &n}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inbox(ctx, in.ID)
	if err != nil || got.RateLimitPerMinute == nil || *got.RateLimitPerMinute != 3 {
		t.Fatalf("the other server reads %+v, %v; want per-minute 3", got, err)
	}
}
