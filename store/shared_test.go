package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testdb"
)

// With the database shared, an inbox another server (another Store)
// changes or deletes is seen at once, on the very next read: no copy is
// kept in memory.
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
	if err := a.DeleteInbox(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inbox(ctx, in.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the other server reads a deleted inbox: %v", err)
	}
}
