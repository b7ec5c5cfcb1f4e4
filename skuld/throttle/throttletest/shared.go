package throttletest

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

func testRestart(t *testing.T, b Backend) {
	lim := throttle.Limits{PerMinute: 3}
	first := newThrottle(b, lim, lim)
	commit(t, reserve(t, first, "a"))
	commit(t, reserve(t, first, "a"))
	reserve(t, first, "a") // in flight when the server stops
	stop(t, first)
	second := newThrottle(b, lim, lim)
	if st := state(t, second, "a"); st.PerMinute.Used != 2 || st.PerMinute.InFlight != 1 {
		t.Fatalf("a new instance sees %+v, want used 2, in flight 1", st.PerMinute)
	}
	refused(t, second, "", gMinute)
}

func testLeaseReclaim(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1}, throttle.Limits{PerMinute: 1})
	reserve(t, th, "a") // its server dies: never committed nor released
	b.Advance(lease - time.Second)
	refused(t, th, "", gMinute)
	if st := state(t, th, ""); st.PerMinute.InFlight != 1 {
		t.Fatalf("before its lease ends: %+v, want 1 in flight", st.PerMinute)
	}
	// Past the lease: it may have gone out at its deadline, so it counts
	// from then, for a whole window.
	b.Advance(b.Margin + 2*time.Second)
	refused(t, th, "", gMinute)
	refused(t, th, "a", gMinute, iMinute)
	if st := state(t, th, ""); st.PerMinute.InFlight != 0 || st.PerMinute.Used != 1 {
		t.Fatalf("after its lease: %+v, want counted (used 1), not in flight", st.PerMinute)
	}
	b.Advance(58 * time.Second) // deadline + 59 s
	refused(t, th, "", gMinute)
	b.Advance(3 * time.Second) // deadline + 62 s
	commit(t, reserve(t, th, "a"))
}

// testLostState: a backend whose state vanished (a flushed Redis) admits
// nothing until it is rebuilt from the durable send record, whatever
// server finds it lost first.
func testLostState(t *testing.T, b Backend) {
	now := time.Now()
	rec := throttle.Record{
		Sent:    []throttle.Sent{{Inbox: "a", At: now.Add(-10 * time.Second)}, {Inbox: "a", At: now.Add(-5 * time.Second)}},
		Pending: []throttle.Pending{{Inbox: "b", Deadline: now.Add(time.Minute)}},
	}
	rebuilds := 0
	o := Options{Global: throttle.Limits{PerMinute: 3}, Inbox: throttle.Limits{PerMinute: 2},
		Rebuild: func(context.Context) (throttle.Record, error) { rebuilds++; return rec, nil }}
	before := b.New(o)
	commit(t, reserve(t, before, "c"))
	stop(t, before) // its commit reaches the backend before the loss
	th := b.New(o)
	b.Lose()
	refused(t, th, "a", gMinute, iMinute)
	if rebuilds != 1 {
		t.Fatalf("rebuilt %d times, want once", rebuilds)
	}
	st, err := th.State(ctx, "a", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Global.PerMinute; g.Used != 2 || g.InFlight != 1 {
		t.Fatalf("global after the rebuild %+v, want the record's 2 sends and 1 in flight", g)
	}
	if i := st.Inbox.PerMinute; i.Used != 2 || i.InFlight != 0 {
		t.Fatalf("inbox a after the rebuild %+v, want its 2 sends", i)
	}
}

// testGathered: far from every limit a server gathers its commits, and
// each counts at the moment it was made; its own reads count them already.
func testGathered(t *testing.T, b Backend) {
	o := Options{Global: throttle.Limits{PerMinute: 10}, SettleDelay: time.Hour}
	th, other := b.New(o), b.New(o)
	for range 3 {
		commit(t, reserve(t, th, ""))
	}
	if st := state(t, other, ""); st.PerMinute.Used != 0 || st.PerMinute.InFlight != 3 {
		t.Fatalf("another server sees %+v, want 3 in flight (gathered)", st.PerMinute)
	}
	if st := state(t, th, ""); st.PerMinute.Used != 3 || st.PerMinute.InFlight != 0 {
		t.Fatalf("the server itself sees %+v, want used 3", st.PerMinute)
	}
	b.Advance(30 * time.Second)
	stop(t, th)
	if st := state(t, other, ""); st.PerMinute.Used != 3 || st.PerMinute.InFlight != 0 {
		t.Fatalf("after the flush another server sees %+v, want used 3", st.PerMinute)
	}
	b.Advance(31 * time.Second)
	if st := state(t, other, ""); st.PerMinute.Used != 0 {
		t.Fatalf("61 s after the commits another server sees %+v, want them gone (counted when made)", st.PerMinute)
	}
}

// testNearLimit: near a limit (80%) a commit goes at once, with whatever
// was gathered; so does every commit for a while after a refusal.
func testNearLimit(t *testing.T, b Backend) {
	o := Options{Global: throttle.Limits{PerMinute: 10}, Inbox: throttle.Limits{PerMinute: 100}, SettleDelay: time.Hour}
	th, other := b.New(o), b.New(o)
	for range 7 {
		commit(t, reserve(t, th, ""))
	}
	if st := state(t, other, ""); st.PerMinute.InFlight != 7 {
		t.Fatalf("another server sees %+v, want 7 in flight (gathered)", st.PerMinute)
	}
	commit(t, reserve(t, th, "")) // the eighth of ten
	if st := state(t, other, ""); st.PerMinute.Used != 8 || st.PerMinute.InFlight != 0 {
		t.Fatalf("after an admission at 80%% another server sees %+v, want used 8", st.PerMinute)
	}

	hot := b.New(Options{Global: throttle.Limits{PerMinute: 100}, Inbox: throttle.Limits{PerMinute: 1},
		SettleDelay: time.Hour})
	commit(t, reserve(t, hot, "x"))
	refused(t, hot, "x", iMinute)
	commit(t, reserve(t, hot, "")) // far from the global limit, but just after a refusal
	if st := state(t, other, ""); st.PerMinute.Used != 10 || st.PerMinute.InFlight != 0 {
		t.Fatalf("after a refusal another server sees %+v, want used 10 (sent at once)", st.PerMinute)
	}
}
