package drivertest

import (
	"reflect"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	td "github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

const lease = time.Minute

var unlimited = throttle.Limits{}

func ask(inbox string, lim throttle.Limits, n int) td.Ask {
	return td.Ask{Inbox: inbox, Limits: lim, Lease: lease, N: n}
}

// testFresh: a backend that never held a state reports it lost, to every
// call, until one Restore.
func testFresh(t *testing.T, h Harness) {
	d := h.Driver
	if _, err := d.Read(ctx, "a"); !isLost(err) {
		t.Fatalf("Read on a fresh backend: %v, want ErrStateLost", err)
	}
	if _, err := d.Reserve(ctx, unlimited, []td.Ask{ask("", unlimited, 1)}); !isLost(err) {
		t.Fatalf("Reserve on a fresh backend: %v, want ErrStateLost", err)
	}
	present(t, d)
	if c := minute(read(t, d, "a").Now, &read(t, d, "").Global); c != (count{}) {
		t.Fatalf("after Restore(empty): %+v, want nothing", c)
	}
}

// testInOrderGlobal: a batch that straddles a global limit admits exactly
// up to it, in order, in the minute window and in the hour window.
func testInOrderGlobal(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	a := ask("", unlimited, 1)
	checkAdmitted(t, reserve(t, d, throttle.Limits{PerMinute: 3}, a, a, a, a, a), true, true, true, false, false)
	checkAdmitted(t, reserve(t, d, throttle.Limits{PerHour: 4}, a, a), true, false)
	raw := read(t, d, "")
	if c := minute(raw.Now, &raw.Global); c != (count{InFlight: 4}) {
		t.Fatalf("global after the batches: %+v, want 4 in flight", c)
	}
}

// testInOrderInbox: each ask is judged by the global limits and its own
// inbox's, as if alone, after the asks before it.
func testInOrderInbox(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	two, hourOne := throttle.Limits{PerMinute: 2}, throttle.Limits{PerHour: 1}
	b := reserve(t, d, throttle.Limits{PerMinute: 5},
		ask("", unlimited, 1),
		ask("a", two, 1), ask("a", two, 1), ask("a", two, 1), // the third: a's minute is full
		ask("b", hourOne, 1), ask("b", hourOne, 1), // the second: b's hour is full
		ask("c", unlimited, 1), // the fifth globally
		ask("d", unlimited, 1)) // the global minute is full
	checkAdmitted(t, b, true, true, true, false, true, false, true, false)
	raw := read(t, d, "a")
	if c := minute(raw.Now, raw.Inbox["a"]); c != (count{InFlight: 2}) {
		t.Fatalf("inbox a: %+v, want 2 in flight", c)
	}
	if c := minute(raw.Now, &raw.Global); c != (count{InFlight: 5}) {
		t.Fatalf("global: %+v, want 5 in flight", c)
	}
}

// testBlocks: a block of n slots is admitted whole or refused, globally
// and per inbox, and a refused block takes nothing.
func testBlocks(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, throttle.Limits{PerMinute: 5},
		ask("", unlimited, 3), ask("", unlimited, 3), ask("", unlimited, 2), ask("", unlimited, 0))
	checkAdmitted(t, b, true, false, true, false)
	four := throttle.Limits{PerMinute: 4}
	b = reserve(t, d, unlimited, ask("a", four, 3), ask("a", four, 2), ask("a", four, 1))
	checkAdmitted(t, b, true, false, true)
	raw := read(t, d, "a")
	if c := minute(raw.Now, &raw.Global); c != (count{InFlight: 9}) {
		t.Fatalf("global: %+v, want 9 slots in flight", c)
	}
	if c := minute(raw.Now, raw.Inbox["a"]); c != (count{InFlight: 4}) {
		t.Fatalf("inbox a: %+v, want 4 slots in flight", c)
	}
}

// testRawBefore: the Raw a Reserve returns is the state before its first
// ask, for the global scope and for each inbox.
func testRawBefore(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, unlimited, ask("a", unlimited, 1))
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Commit: true, Lease: lease})
	reserve(t, d, unlimited, ask("b", unlimited, 1)) // in flight
	b = reserve(t, d, unlimited, ask("", unlimited, 1), ask("a", unlimited, 1), ask("a", unlimited, 2))
	checkAdmitted(t, b, true, true, true)
	if c := minute(b.Now, &b.Global); c != (count{Sent: 1, InFlight: 1}) {
		t.Fatalf("the batch's global scope: %+v, want the state before it (1 sent, 1 in flight)", c)
	}
	if c := minute(b.Now, b.Inbox["a"]); c != (count{Sent: 1}) {
		t.Fatalf("the batch's inbox a: %+v, want the state before it (1 sent)", c)
	}
}

// testCommitAge: a commit counts at now-Age in the global scope and the
// inbox's, and ends its reservation; a commit whose reservation is gone
// still counts.
func testCommitAge(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	const age = 30 * time.Second
	b := reserve(t, d, unlimited, ask("a", unlimited, 1))
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Commit: true, Age: age, Lease: lease})
	raw := read(t, d, "a")
	for _, s := range []*td.RawScope{&raw.Global, raw.Inbox["a"]} {
		if c := minute(raw.Now, s); c != (count{Sent: 1}) {
			t.Fatalf("after a commit: %+v, want 1 sent, nothing in flight", c)
		}
		for _, w := range []struct {
			buckets []td.Bucket
			width   int64
		}{{s.Minute, int64(time.Second)}, {s.Hour, int64(time.Minute)}} {
			lo, hi := floorDiv(b.Now-int64(age), w.width), floorDiv(raw.Now-int64(age), w.width)
			for _, bk := range w.buckets {
				if bk.Sends > 0 && (bk.Index < lo || bk.Index > hi) {
					t.Fatalf("commit aged %v counted in bucket %d (width %d ns), want in [%d, %d]",
						age, bk.Index, w.width, lo, hi)
				}
			}
		}
	}
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Commit: true, Lease: lease})
	raw = read(t, d, "a")
	if c := minute(raw.Now, raw.Inbox["a"]); c != (count{Sent: 2}) {
		t.Fatalf("after a commit of a reservation already gone: %+v, want it counted too (2 sent)", c)
	}
}

// testRelease: a release frees the slot and counts nothing.
func testRelease(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	one := throttle.Limits{PerMinute: 1}
	b := reserve(t, d, one, ask("a", one, 1))
	checkAdmitted(t, b, true)
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Lease: lease})
	raw := read(t, d, "a")
	if c, ci := minute(raw.Now, &raw.Global), minute(raw.Now, raw.Inbox["a"]); c != (count{}) || ci != (count{}) {
		t.Fatalf("after a release: global %+v, inbox %+v; want nothing", c, ci)
	}
	checkAdmitted(t, reserve(t, d, one, ask("a", one, 1)), true)
}

// testBlockSettle: each settlement of a block takes one of its slots.
func testBlockSettle(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, unlimited, ask("a", unlimited, 3))
	id := b.Verdicts[0].ID
	for i, commit := range []bool{true, false, true} {
		settle(t, d, td.Settlement{ID: id, Inbox: "a", Commit: commit, Lease: lease})
		raw := read(t, d, "a")
		sent := map[int]int{0: 1, 1: 1, 2: 2}[i]
		want := count{Sent: sent, InFlight: 2 - i}
		for _, s := range []*td.RawScope{&raw.Global, raw.Inbox["a"]} {
			if c := minute(raw.Now, s); c != want {
				t.Fatalf("after %d settlements of a block of 3: %+v, want %+v", i+1, c, want)
			}
		}
	}
}

// testPastDeadline: a reservation past its deadline counts as a send per
// slot at its deadline, in the next admission.
func testPastDeadline(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, unlimited, td.Ask{Inbox: "a", Lease: time.Millisecond, N: 2})
	flights := read(t, d, "a").Global.Flights
	if len(flights) != 1 {
		t.Fatalf("flights %+v, want the one reservation", flights)
	}
	deadline := flights[0].Deadline
	waitPast(t, d, deadline)
	two := throttle.Limits{PerMinute: 2}
	after := reserve(t, d, two, ask("", unlimited, 1))
	checkAdmitted(t, after, false)
	checkAdmitted(t, reserve(t, d, unlimited, ask("a", two, 1)), false)
	raw := read(t, d, "a")
	for _, s := range []*td.RawScope{&after.Global, &raw.Global, raw.Inbox["a"]} {
		if c := minute(raw.Now, s); c != (count{Sent: 2}) {
			t.Fatalf("a block of 2 past its deadline: %+v, want 2 sent", c)
		}
		for _, bk := range s.Minute {
			if bk.Sends > 0 && bk.Index != floorDiv(deadline, int64(time.Second)) {
				t.Fatalf("counted in bucket %d, want the deadline's %d (reserved at %d)",
					bk.Index, floorDiv(deadline, int64(time.Second)), b.Now)
			}
		}
	}
}

// testReadChangesNothing: two reads see the same state, and a reservation
// past its deadline stays one: only an admission counts it.
func testReadChangesNothing(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, unlimited, ask("a", unlimited, 1))
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Commit: true, Lease: lease})
	reserve(t, d, unlimited, td.Ask{Inbox: "a", Lease: time.Millisecond, N: 1}) // the last admission
	first := read(t, d, "a")
	if len(first.Global.Flights) != 1 {
		t.Fatalf("flights %+v, want the one reservation", first.Global.Flights)
	}
	waitPast(t, d, first.Global.Flights[0].Deadline)
	second := read(t, d, "a")
	if !reflect.DeepEqual(first.Global, second.Global) || !reflect.DeepEqual(first.Inbox, second.Inbox) {
		t.Fatalf("two reads differ:\n%+v %+v\n%+v %+v", first.Global, first.Inbox["a"], second.Global, second.Inbox["a"])
	}
	if len(second.Global.Flights) != 1 || second.Global.Flights[0].Deadline > second.Now {
		t.Fatalf("after its deadline a read sees flights %+v, want the reservation still there", second.Global.Flights)
	}
}

// record is a send record of two sends from a and one send of b in flight.
func record() td.Record {
	now := time.Now()
	return td.Record{
		Sent:    []td.Sent{{Inbox: "a", At: now.Add(-10 * time.Second)}, {Inbox: "a", At: now.Add(-5 * time.Second)}},
		Pending: []td.Pending{{Inbox: "b", Deadline: now.Add(time.Minute)}},
	}
}

// checkRecord: the state is rec's, and nothing else.
func checkRecord(t *testing.T, d td.Driver, rec td.Record) {
	t.Helper()
	raw := read(t, d, "a")
	if c := minute(raw.Now, &raw.Global); c != (count{Sent: 2, InFlight: 1}) {
		t.Fatalf("global: %+v, want the record's 2 sends and 1 in flight", c)
	}
	if c := minute(raw.Now, raw.Inbox["a"]); c != (count{Sent: 2}) {
		t.Fatalf("inbox a: %+v, want the record's 2 sends", c)
	}
	raw = read(t, d, "b")
	f := raw.Inbox["b"]
	if c := minute(raw.Now, f); c != (count{InFlight: 1}) {
		t.Fatalf("inbox b: %+v, want the record's 1 in flight", c)
	}
	if got, want := f.Flights[0].Deadline, rec.Pending[0].Deadline.UnixNano(); got > want || want-got >= int64(time.Microsecond) {
		t.Fatalf("restored deadline %d, want %d (to the µs)", got, want)
	}
}

// testRestoreOnlyWhenLost: Restore(rec, false) writes only when the state
// is lost, and reports whether it did.
func testRestoreOnlyWhenLost(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	reserve(t, d, unlimited, ask("", unlimited, 1))
	rec := record()
	if done, err := d.Restore(ctx, rec, false); err != nil || done {
		t.Fatalf("Restore(rec, false) on a present state = %v, %v; want false, nil", done, err)
	}
	if raw := read(t, d, ""); minute(raw.Now, &raw.Global) != (count{InFlight: 1}) {
		t.Fatalf("Restore(rec, false) on a present state changed it: %+v", minute(raw.Now, &raw.Global))
	}
	lose(t, h, All)
	if _, err := d.Read(ctx, ""); !isLost(err) {
		t.Fatalf("Read after the state was lost: %v, want ErrStateLost", err)
	}
	if done, err := d.Restore(ctx, rec, false); err != nil || !done {
		t.Fatalf("Restore(rec, false) on a lost state = %v, %v; want true, nil", done, err)
	}
	checkRecord(t, d, rec)
}

// testRestoreReplaces: Restore(rec, true) replaces a present state.
func testRestoreReplaces(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	b := reserve(t, d, unlimited, ask("a", unlimited, 1), ask("c", unlimited, 1))
	settle(t, d, td.Settlement{ID: b.Verdicts[0].ID, Inbox: "a", Commit: true, Lease: lease})
	rec := record()
	if done, err := d.Restore(ctx, rec, true); err != nil || !done {
		t.Fatalf("Restore(rec, true) = %v, %v; want true, nil", done, err)
	}
	checkRecord(t, d, rec)
}
