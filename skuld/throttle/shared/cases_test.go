package shared_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// testGathered: far from every limit a server gathers its commits, and
// each counts at the moment it was made; its own reads count them already.
func testGathered(t *testing.T, b throttletest.Backend) {
	o := throttletest.Options{Global: throttle.Limits{PerMinute: 10}, SettleDelay: time.Hour}
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
func testNearLimit(t *testing.T, b throttletest.Backend) {
	o := throttletest.Options{Global: throttle.Limits{PerMinute: 10}, Inbox: throttle.Limits{PerMinute: 100}, SettleDelay: time.Hour}
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

	hot := b.New(throttletest.Options{Global: throttle.Limits{PerMinute: 100}, Inbox: throttle.Limits{PerMinute: 1},
		SettleDelay: time.Hour})
	commit(t, reserve(t, hot, "x"))
	refused(t, hot, "x", iMinute)
	commit(t, reserve(t, hot, "")) // far from the global limit, but just after a refusal
	if st := state(t, other, ""); st.PerMinute.Used != 10 || st.PerMinute.InFlight != 0 {
		t.Fatalf("after a refusal another server sees %+v, want used 10 (sent at once)", st.PerMinute)
	}
}

// testSpares: far from every limit a server admits most sends from spare
// admissions it took with an earlier call, without asking the backend.
// Every server sees the room they hold as in flight, the server itself does
// not, and what it has not used within a second goes back: once it stops,
// the others see its sends and nothing else.
func testSpares(t *testing.T, b throttletest.Backend) {
	o := throttletest.Options{Global: throttle.Limits{PerMinute: 100000}, SettleDelay: time.Hour}
	th, other := b.New(o), b.New(o)
	commit(t, reserve(t, th, "")) // learns the room
	commit(t, reserve(t, th, "")) // takes spares with it
	sent := 2
	if st := state(t, th, ""); st.PerMinute.Used != sent || st.PerMinute.InFlight != 0 {
		t.Fatalf("the server itself sees %+v, want used 2 and its spares not in flight", st.PerMinute)
	}
	held := state(t, other, "").PerMinute.InFlight - sent // its commits are gathered
	if held < 1 {
		t.Fatalf("another server sees %d in flight, want the %d gathered commits and spares", held+sent, sent)
	}
	if b.Stall != nil {
		resume := b.Stall() // the backend answers nothing until resumed
		var tickets []throttle.Ticket
		for range held {
			// A caller that needed the backend would wait for its
			// deadline: a bound on the hang, not a measure of speed.
			c, cancel := context.WithTimeout(ctx, 30*time.Second)
			tk, err := th.Reserve(c, throttle.Request{Lease: lease})
			cancel()
			if err != nil {
				resume()
				t.Fatalf("with the backend stalled and %d spares held: %v, want admitted from a spare", held, err)
			}
			tickets = append(tickets, tk)
		}
		resume()
		for _, tk := range tickets {
			commit(t, tk)
			sent++
		}
	}
	b.Advance(2 * time.Second)
	commit(t, reserve(t, th, "")) // spares older than a second go back first
	sent++
	stop(t, th)
	if st := state(t, other, ""); st.PerMinute.Used != sent || st.PerMinute.InFlight != 0 {
		t.Fatalf("after the server stopped another sees %+v, want used %d and nothing in flight", st.PerMinute, sent)
	}
}

// testSparesKeepThePromise: two servers taking spares, many senders, a
// limit they reach: never more admitted than the limit, and once both stop
// a third server sees exactly the sends admitted, nothing held. (It used
// to allow more when a call had timed out: the gatherer sent a settlement
// again, and a commit the backend had applied counted twice. A failed call
// is not sent again now, and the case runs over the in-memory driver,
// whose calls do not time out on a starved machine.)
func testSparesKeepThePromise(t *testing.T, b throttletest.Backend) {
	const limit, n = 2000, 1200
	o := throttletest.Options{Global: throttle.Limits{PerMinute: limit}, Inbox: throttle.Limits{PerMinute: limit / 2}}
	a, c := b.New(o), b.New(o)
	var total int
	for range 2 { // the second round finds room learned and spares taken
		var wg sync.WaitGroup
		var got [2]int
		for i, th := range []throttle.Throttle{a, c} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var errs []error
				got[i], errs = hammerThrough(t, th, n/2, func(k int) string { return []string{"", "x"}[k%2] })
				if len(errs) > 0 {
					t.Errorf("%d admissions failed, first: %v", len(errs), errs[0])
				}
			}()
		}
		wg.Wait()
		total += got[0] + got[1]
	}
	if total > limit {
		t.Fatalf("%d admitted, over the limit of %d", total, limit)
	}
	stop(t, a)
	stop(t, c)
	st, err := b.New(o).State(ctx, "x", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	g := st.Global.PerMinute
	if g.Used != total || g.InFlight != 0 {
		t.Fatalf("after both stopped: %+v, want used %d (every send admitted), nothing in flight", g, total)
	}
	if in := st.Inbox.PerMinute; in.Used > limit/2 || in.InFlight != 0 {
		t.Fatalf("inbox x after both stopped: %+v, want at most %d used, nothing in flight", in, limit/2)
	}
}

// testSparesOfADeadServer: a server that dies holding spare slots has each
// counted as a send at the block's deadline, in the global windows and its
// inbox's, as any reservation of a crashed server: never lost, never less.
func testSparesOfADeadServer(t *testing.T, b throttletest.Backend) {
	lim := throttle.Limits{PerMinute: 100000}
	o := throttletest.Options{Global: lim, Inbox: lim, SettleDelay: time.Hour} // what it holds never leaves it
	dead, other := b.New(o), b.New(o)
	commit(t, reserve(t, dead, "a")) // learns the room
	commit(t, reserve(t, dead, "a")) // takes spares with it
	held := state(t, other, "a").PerMinute.InFlight
	if held <= 2 {
		t.Fatalf("another server sees %d in flight, want the 2 gathered commits and spare slots", held)
	}
	b.Advance(lease + b.Margin + 4*time.Second) // past every deadline, spares' included
	commit(t, reserve(t, other, "b"))           // an admission reclaims what is past its deadline
	st, err := other.State(ctx, "a", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Global.PerMinute; g.Used != held+1 || g.InFlight != 0 {
		t.Fatalf("global after the deadlines: %+v, want every slot of the dead server counted (%d) and the new send", g, held)
	}
	if in := st.Inbox.PerMinute; in.Used != held || in.InFlight != 0 {
		t.Fatalf("inbox a after the deadlines: %+v, want every slot of the dead server counted (%d)", in, held)
	}
}
