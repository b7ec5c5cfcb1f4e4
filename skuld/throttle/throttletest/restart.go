package throttletest

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
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
	rec := throttledriver.Record{
		Sent:    []throttledriver.Sent{{Inbox: "a", At: now.Add(-10 * time.Second)}, {Inbox: "a", At: now.Add(-5 * time.Second)}},
		Pending: []throttledriver.Pending{{Inbox: "b", Deadline: now.Add(time.Minute)}},
	}
	rebuilds := 0
	o := Options{Global: throttle.Limits{PerMinute: 3}, Inbox: throttle.Limits{PerMinute: 2},
		Rebuild: func(context.Context) (throttledriver.Record, error) { rebuilds++; return rec, nil }}
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
