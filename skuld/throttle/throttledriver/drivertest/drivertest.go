// Package drivertest is the conformance suite of throttledriver.Driver:
// it calls a driver directly, with no shared throttle in front, and checks
// the contract the shared throttle builds on (admission in order as if one
// at a time, by every window: the second and the day as the minute and
// the hour; the raw state read before the first ask, settlements, the
// deadline rule, Read and Restore), like river's riverdrivertest. Every
// driver package runs it from its tests.
//
// A driver stamps with its backend's clock, so the cases reason about
// ages, leases and the Now each answer carries, never a fake clock; none
// waits more than about a second.
package drivertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// Part names a part of a backend's state that a harness can make vanish.
type Part string

// All is the whole state, as a flushed Redis or emptied tables. Every
// harness supports it; cases about other parts skip, with the reason, on
// a harness that lacks them.
const All Part = "all"

// Harness is one driver on a fresh backend of its own, for one case: a
// backend that has never held a state, so that it reports
// throttledriver.ErrStateLost until Restore.
type Harness struct {
	Driver throttledriver.Driver
	// Lose makes a part of the state vanish; All is required.
	Lose map[Part]func(t *testing.T)
}

// Run runs the suite; newHarness is called once per case. The cases run in
// parallel, each on the backend its newHarness gave it.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"FreshStateIsLost", testFresh},
		{"ReserveInOrderGlobal", testInOrderGlobal},
		{"ReserveInOrderPerInbox", testInOrderInbox},
		{"BlocksWholeOrRefused", testBlocks},
		{"RawIsBeforeTheFirstAsk", testRawBefore},
		{"CommitCountsAtAge", testCommitAge},
		{"ReleaseFrees", testRelease},
		{"BlockSettlesOneSlotEach", testBlockSettle},
		{"PastDeadlineCountsAtDeadline", testPastDeadline},
		{"ReadChangesNothing", testReadChangesNothing},
		{"RestoreOnlyWhenLost", testRestoreOnlyWhenLost},
		{"RestoreReplaces", testRestoreReplaces},
		{"SecondAndDayAdmit", testSecondAndDay},
		{"AgedCommitsInEveryWindow", testAgedCommits},
		{"RestoreEveryWindow", testRestoreEveryWindow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newHarness(t))
		})
	}
	t.Run("PartsLost", func(t *testing.T) {
		t.Parallel()
		testPartsLost(t, newHarness)
	})
}

var ctx = context.Background()

// lose makes part of h's state vanish, or skips the case.
func lose(t *testing.T, h Harness, part Part) {
	t.Helper()
	f := h.Lose[part]
	if f == nil {
		t.Skipf("the harness cannot lose %q", part)
	}
	f(t)
}

// present makes a fresh backend's state present (and empty), as the first
// server's rebuild does.
func present(t *testing.T, d throttledriver.Driver) {
	t.Helper()
	done, err := d.Restore(ctx, throttledriver.Record{}, false)
	if err != nil || !done {
		t.Fatalf("Restore(empty, false) on a fresh backend = %v, %v; want true, nil", done, err)
	}
}

func reserve(t *testing.T, d throttledriver.Driver, global throttle.Limits, asks ...throttledriver.Ask) *throttledriver.Batch {
	t.Helper()
	b, err := d.Reserve(ctx, global, asks)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if len(b.Verdicts) != len(asks) {
		t.Fatalf("Reserve answered %d verdicts for %d asks", len(b.Verdicts), len(asks))
	}
	return b
}

func settle(t *testing.T, d throttledriver.Driver, s ...throttledriver.Settlement) {
	t.Helper()
	if err := d.Settle(ctx, s); err != nil {
		t.Fatalf("Settle: %v", err)
	}
}

func read(t *testing.T, d throttledriver.Driver, inbox string) *throttledriver.Raw {
	t.Helper()
	raw, err := d.Read(ctx, inbox)
	if err != nil {
		t.Fatalf("Read(%q): %v", inbox, err)
	}
	return raw
}

// admitted lists the verdicts' Admitted.
func admitted(b *throttledriver.Batch) []bool {
	out := make([]bool, len(b.Verdicts))
	for i, v := range b.Verdicts {
		out[i] = v.Admitted
	}
	return out
}

func checkAdmitted(t *testing.T, b *throttledriver.Batch, want ...bool) {
	t.Helper()
	got := admitted(b)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("admitted %v, want %v", got, want)
		}
	}
	seen := map[int64]bool{}
	for _, v := range b.Verdicts {
		if v.Admitted && (v.ID == 0 || seen[v.ID]) {
			t.Fatalf("verdicts %+v: an admitted ask without an id of its own", b.Verdicts)
		}
		seen[v.ID] = true
	}
}

// count is one scope's minute window at now: the sends counted (buckets
// in the window, and the slots of reservations past their deadline) and
// the slots in flight.
type count struct{ Sent, InFlight int }

func minute(now int64, s *throttledriver.RawScope) count {
	var c count
	if s == nil {
		return c
	}
	lo := floorDiv(now-int64(time.Minute), int64(time.Second))
	for _, b := range s.Minute {
		if b.Index >= lo {
			c.Sent += b.Sends
		}
	}
	for _, f := range s.Flights {
		if f.Deadline <= now {
			c.Sent += max(f.N, 1)
		} else {
			c.InFlight += max(f.N, 1)
		}
	}
	return c
}

// waitPast waits, on the backend's clock, until deadline has passed.
func waitPast(t *testing.T, d throttledriver.Driver, deadline int64) {
	t.Helper()
	for start := time.Now(); time.Since(start) < 2*time.Second; time.Sleep(time.Millisecond) {
		if read(t, d, "").Now > deadline {
			return
		}
	}
	t.Fatalf("the backend's clock did not pass %d within 2 s", deadline)
}

func isLost(err error) bool { return errors.Is(err, throttledriver.ErrStateLost) }

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
