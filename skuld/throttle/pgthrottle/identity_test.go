package pgthrottle_test

import (
	"context"
	"testing"

	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
)

// The identity row: missing until kept; the first Keep writes it, a later
// Keep (another server's, the watcher's) leaves it; a restore that
// replaces the state keeps it.
func TestIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, db := migrated(t)
	id := pgthrottle.NewIdentity(db)
	if got, err := id.Read(ctx); err != nil || got != "" {
		t.Fatalf("Read before any Keep = %q, %v; want \"\", nil", got, err)
	}
	if got, err := id.Keep(ctx, "first"); err != nil || got != "first" {
		t.Fatalf("first Keep = %q, %v; want first", got, err)
	}
	if got, err := id.Keep(ctx, "second"); err != nil || got != "first" {
		t.Fatalf("second Keep = %q, %v; want the first kept", got, err)
	}
	exec(t, db, `SELECT pgthrottle_restore(true, '{}', '{}', '{}', '{}')`)
	if got, err := id.Read(ctx); err != nil || got != "first" {
		t.Fatalf("Read after a replacing restore = %q, %v; want first", got, err)
	}
}
