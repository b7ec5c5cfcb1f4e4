package redisthrottle_test

import (
	"context"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// The identity key: missing until kept; the first Keep writes it, a later
// Keep leaves it; another prefix has its own; a Restore that replaces the
// state (which deletes every key of the prefix) keeps it.
func TestIdentity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rdb, prefix := redistest.Client(t), redistest.Prefix(t)
	id := redisthrottle.NewIdentity(rdb, prefix)
	if got, err := id.Read(ctx); err != nil || got != "" {
		t.Fatalf("Read before any Keep = %q, %v; want \"\", nil", got, err)
	}
	if got, err := id.Keep(ctx, "first"); err != nil || got != "first" {
		t.Fatalf("first Keep = %q, %v; want first", got, err)
	}
	if got, err := id.Keep(ctx, "second"); err != nil || got != "first" {
		t.Fatalf("second Keep = %q, %v; want the first kept", got, err)
	}
	if got, _ := redisthrottle.NewIdentity(rdb, prefix+":other").Read(ctx); got != "" {
		t.Fatalf("another prefix reads %q, want none", got)
	}
	th := redisthrottle.New(rdb, prefix, shared.Options{
		Rebuild: func(context.Context) (throttledriver.Record, error) { return throttledriver.Record{}, nil }})
	defer th.Close(ctx)
	if err := th.Rebuild(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := id.Read(ctx); err != nil || got != "first" {
		t.Fatalf("Read after a replacing restore = %q, %v; want first", got, err)
	}
}
