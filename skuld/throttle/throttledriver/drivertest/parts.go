package drivertest

import (
	"errors"
	"slices"
	"testing"

	"github.com/nornweave/nornweave/skuld/throttle"
	td "github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// Parts a harness may make vanish on their own, besides All: a key deleted
// or evicted, a table truncated, rows deleted. Each names the global scope
// or inbox "a"'s; a harness lists those its backend has.
const (
	GlobalSecond Part = "global second buckets"
	GlobalMinute Part = "global minute buckets"
	GlobalHour   Part = "global hour buckets"
	GlobalDay    Part = "global day buckets"
	GlobalFlight Part = "global flights"
	GlobalSlots  Part = "global slots"
	InboxMinute  Part = "inbox minute buckets"
	InboxHour    Part = "inbox hour buckets"
	InboxDay     Part = "inbox day buckets"
	InboxFlight  Part = "inbox flights"
	InboxSlots   Part = "inbox slots"
	InboxAll     Part = "every part of an inbox"
	IDs          Part = "reservation ids"
	Buckets      Part = "every bucket"
	Flights      Part = "every flight"
)

// testPartsLost: a part of the state gone on its own is a lost state, not
// an empty part: Reserve and Read answer an *IncompleteError (which is
// ErrStateLost) until Restore rebuilds it, and Restore does, once. Before
// the check, one hash deleted let 739 sends through an hour limited to 600.
func testPartsLost(t *testing.T, newHarness func(t *testing.T) Harness) {
	parts := partsOf(newHarness(t))
	if len(parts) == 0 {
		t.Skip("the harness can lose no part but the whole state")
	}
	for _, part := range parts {
		t.Run(string(part), func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			d := h.Driver
			present(t, d)
			lim := throttle.Limits{PerMinute: 100, PerHour: 100}
			b := reserve(t, d, lim, ask("", lim, 1), ask("a", lim, 1), ask("a", lim, 3))
			checkAdmitted(t, b, true, true, true)
			settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Commit: true},
				td.Settlement{ID: b.Verdicts[1].ID, Inbox: "a", Commit: true, Lease: lease})
			lose(t, h, part)
			var inc *td.IncompleteError
			if _, err := d.Reserve(ctx, lim, []td.Ask{ask("a", lim, 1)}); !errors.As(err, &inc) || !errors.Is(err, td.ErrStateLost) {
				t.Fatalf("Reserve after losing %s: %v, want an *IncompleteError that is ErrStateLost", part, err)
			}
			if _, err := d.Read(ctx, "a"); !errors.Is(err, td.ErrStateLost) {
				t.Fatalf("Read after losing %s: %v, want ErrStateLost", part, err)
			}
			if done, err := d.Restore(ctx, td.Record{}, false); err != nil || !done {
				t.Fatalf("Restore(rec, false) of an incomplete state = %v, %v; want true, nil", done, err)
			}
			if done, err := d.Restore(ctx, td.Record{}, false); err != nil || done {
				t.Fatalf("a second Restore(rec, false) = %v, %v; want false: the first rebuilt it", done, err)
			}
			checkAdmitted(t, reserve(t, d, lim, ask("a", lim, 1)), true)
		})
	}
}

func partsOf(h Harness) []Part {
	var out []Part
	for p := range h.Lose {
		if p != All {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
