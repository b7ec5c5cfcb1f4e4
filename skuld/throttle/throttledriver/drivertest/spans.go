package drivertest

import (
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	td "github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// The widths and spans of the windows a RawScope holds.
const (
	secondWidth = 100 * time.Millisecond
	dayWidth    = 15 * time.Minute
	day         = 24 * time.Hour
)

// windows is one scope's sends counted in each window at now, by the ring
// rule (a bucket b of width w counts while b >= floor((now-span)/w));
// flights are left out.
type windows struct{ Second, Minute, Hour, Day int }

func counted(now int64, s *td.RawScope) windows {
	if s == nil {
		return windows{}
	}
	sum := func(bs []td.Bucket, span, width time.Duration) int {
		n, lo := 0, floorDiv(now-int64(span), int64(width))
		for _, b := range bs {
			if b.Index >= lo {
				n += b.Sends
			}
		}
		return n
	}
	return windows{sum(s.Second, time.Second, secondWidth), sum(s.Minute, time.Minute, time.Second),
		sum(s.Hour, time.Hour, time.Minute), sum(s.Day, day, dayWidth)}
}

// testSecondAndDay: the global second and day, and an inbox's day, each
// admit up to their limit and refuse the ask past it, as the minute and
// the hour do; an inbox's per-second limit is none (an inbox has no
// second window).
func testSecondAndDay(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	a := ask("", unlimited, 1)
	// One batch: the whole of it is judged in the same instant, so the
	// second window holds every ask whatever the machine's speed.
	b := reserve(t, d, throttle.Limits{PerSecond: 3}, a, a, a, a)
	checkAdmitted(t, b, true, true, true, false)
	b2 := reserve(t, d, throttle.Limits{PerSecond: 2}, ask("", unlimited, 0))
	checkAdmitted(t, b2, false) // 3 in flight count in the second too
	for _, v := range b.Verdicts[:3] {
		settle(t, d, td.Settlement{ID: v.ID, Commit: true, Lease: lease})
	}
	checkAdmitted(t, reserve(t, d, throttle.Limits{PerDay: 5}, ask("", unlimited, 2), a), true, false)
	oneADay := throttle.Limits{PerDay: 1}
	checkAdmitted(t, reserve(t, d, unlimited, ask("a", oneADay, 1), ask("a", oneADay, 1), ask("b", oneADay, 2)),
		true, false, false)
	perSecond := throttle.Limits{PerSecond: 1}
	checkAdmitted(t, reserve(t, d, unlimited, ask("c", perSecond, 1), ask("c", perSecond, 1)), true, true)
	raw := read(t, d, "a")
	if w := counted(raw.Now, &raw.Global); w.Day != 3 {
		t.Fatalf("global day: %+v, want the 3 commits counted", w)
	}
}

// testAgedCommits: a commit counts at now-Age in every window's bucket of
// that moment, so each window holds it exactly as long as the ring rule
// says: 30 min ago is in the hour and the day only, 23 h 50 min ago in the
// day only, 24 h 20 min ago (past the day and its last bucket) nowhere;
// and a day limit judges by what the day still holds.
func testAgedCommits(t *testing.T, h Harness) {
	d := h.Driver
	present(t, d)
	ages := []time.Duration{30 * time.Minute, 23*time.Hour + 50*time.Minute, 24*time.Hour + 20*time.Minute}
	b := reserve(t, d, unlimited, ask("a", unlimited, 1), ask("a", unlimited, 1), ask("a", unlimited, 1))
	for i, age := range ages {
		settle(t, d, td.Settlement{ID: b.Verdicts[i].ID, Inbox: "a", Commit: true, Age: age, Lease: lease})
	}
	raw := read(t, d, "a")
	for _, s := range []*td.RawScope{&raw.Global, raw.Inbox["a"]} {
		if w := counted(raw.Now, s); w != (windows{Hour: 1, Day: 2}) {
			t.Fatalf("commits aged %v: %+v, want 1 in the hour and 2 in the day", ages, w)
		}
		for _, w := range []struct {
			name    string
			buckets []td.Bucket
			width   time.Duration
		}{{"second", s.Second, secondWidth}, {"minute", s.Minute, time.Second}, {"hour", s.Hour, time.Minute},
			{"day", s.Day, dayWidth}} {
			for _, bk := range w.buckets {
				ok := false
				for _, age := range ages {
					lo, hi := floorDiv(b.Now-int64(age), int64(w.width)), floorDiv(raw.Now-int64(age), int64(w.width))
					ok = ok || bk.Index >= lo && bk.Index <= hi
				}
				if bk.Sends > 0 && !ok {
					t.Fatalf("%s bucket %d holds %d sends, not the bucket of any commit aged %v", w.name, bk.Index, bk.Sends, ages)
				}
			}
		}
	}
	three := throttle.Limits{PerDay: 3}
	checkAdmitted(t, reserve(t, d, three, ask("", unlimited, 1), ask("", unlimited, 1)), true, false)
	checkAdmitted(t, reserve(t, d, unlimited, ask("a", three, 1), ask("a", three, 1)), true, false)
}

// testRestoreEveryWindow: Restore counts each send of the record in every
// window of its scopes, in the bucket of its moment: a send 2 h old in
// the day alone, one 10 s old in the minute, the hour and the day.
func testRestoreEveryWindow(t *testing.T, h Harness) {
	d := h.Driver
	now := time.Now()
	at := []time.Time{now.Add(-23 * time.Hour), now.Add(-2 * time.Hour), now.Add(-10 * time.Second)}
	rec := td.Record{Sent: []td.Sent{{Inbox: "a", At: at[0]}, {Inbox: "a", At: at[1]}, {At: at[2]}}}
	if done, err := d.Restore(ctx, rec, false); err != nil || !done {
		t.Fatalf("Restore(rec, false) on a fresh backend = %v, %v; want true, nil", done, err)
	}
	raw := read(t, d, "a")
	if w := counted(raw.Now, &raw.Global); w != (windows{Minute: 1, Hour: 1, Day: 3}) {
		t.Fatalf("global after Restore: %+v, want the record's sends in their windows", w)
	}
	if w := counted(raw.Now, raw.Inbox["a"]); w != (windows{Day: 2}) {
		t.Fatalf("inbox a after Restore: %+v, want its 2 sends in the day", w)
	}
	for _, x := range []time.Time{at[0], at[1]} {
		want := floorDiv(x.UnixNano(), int64(dayWidth))
		found := false
		for _, b := range raw.Inbox["a"].Day {
			found = found || b.Index == want && b.Sends > 0
		}
		if !found {
			t.Fatalf("inbox a's day buckets %+v, want one at %d (the send of %v)", raw.Inbox["a"].Day, want, x)
		}
	}
	// The send of 10 s ago left the second long ago; the second's bucket
	// is checked on a send restored a minute ahead, whose bucket a read
	// returns however slow the machine (one after now's counts as now's).
	lose(t, h, All)
	rec = td.Record{Sent: []td.Sent{{At: time.Now().Add(time.Minute)}}}
	if done, err := d.Restore(ctx, rec, false); err != nil || !done {
		t.Fatalf("Restore(rec, false) on a lost state = %v, %v; want true, nil", done, err)
	}
	raw = read(t, d, "")
	want := floorDiv(rec.Sent[0].At.UnixNano(), int64(secondWidth))
	if len(raw.Global.Second) != 1 || raw.Global.Second[0].Index != want || raw.Global.Second[0].Sends != 1 {
		t.Fatalf("global second buckets %+v, want 1 send in %d", raw.Global.Second, want)
	}
	if w := counted(raw.Now, &raw.Global); w.Day != 1 || w.Hour != 1 {
		t.Fatalf("global after restoring a send a minute ahead: %+v, want it in the hour and the day", w)
	}
}
