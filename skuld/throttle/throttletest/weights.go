package throttletest

import (
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// The cases of sends that cost more than one unit (THROTTLE_UNIT=recipient)
// and of the second and day windows, which a backend runs when
// Backend.Units says it keeps them.

// weightLease is the weighted cases' lease: longer than the time they
// advance between a commit and a judgement, so that a commit a shared
// backend still gathers is never counted at its deadline besides (see
// Options.Settle).
const weightLease = 2 * time.Minute

func reserveN(t *testing.T, th throttle.Throttle, inbox string, n int) throttle.Ticket {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: weightLease, Cost: n})
	if err != nil {
		t.Fatalf("Reserve(%q, cost %d): %v, want admitted", inbox, n, err)
	}
	return tk
}

func refusedN(t *testing.T, th throttle.Throttle, inbox string, n int, windows ...throttle.Window) *throttle.RateLimitedError {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: weightLease, Cost: n})
	var rl *throttle.RateLimitedError
	if !errors.As(err, &rl) {
		if tk != nil {
			_, _ = tk.Release(ctx)
		}
		t.Fatalf("Reserve(%q, cost %d) = %v, want refused by %v", inbox, n, err, windows)
	}
	if got := rl.Windows(); !equal(got, windows) {
		t.Fatalf("cost %d refused by %v, want %v", n, got, windows)
	}
	if rl.Cost != n {
		t.Fatalf("refusal's Cost = %d, want %d", rl.Cost, n)
	}
	checkRefusalSnapshot(t, rl)
	return rl
}

// testWeightEqualToRoom: a cost that exactly fills the room left is
// admitted, in the global window and the inbox's at once; one more unit is
// not.
func testWeightEqualToRoom(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 10}, throttle.Limits{PerMinute: 6})
	commit(t, reserveN(t, th, "a", 3))
	commit(t, reserveN(t, th, "b", 4))
	commit(t, reserveN(t, th, "a", 3)) // the inbox's 6 and the global 10, full together
	if st := state(t, th, ""); st.PerMinute.Used != 10 || st.PerMinute.Remaining != 0 {
		t.Fatalf("global per-minute = %+v, want used 10, remaining 0", st.PerMinute)
	}
	if st := state(t, th, "a"); st.PerMinute.Used != 6 {
		t.Fatalf("inbox per-minute = %+v, want used 6", st.PerMinute)
	}
	refusedN(t, th, "c", 1, gMinute)
}

// testWeightOneOver: a cost one over the room is refused whole, takes
// nothing, and its Retry-After is when room for all of it appears: not
// when the first unit frees. At that moment it is admitted.
func testWeightOneOver(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 10}, throttle.Limits{})
	commit(t, reserveN(t, th, "", 3))
	b.Advance(10 * time.Second)
	commit(t, reserveN(t, th, "", 3))
	b.Advance(10 * time.Second)
	commit(t, reserveN(t, th, "", 3)) // 9 of 10, at 0, 10 and 20 s
	rl := refusedN(t, th, "", 3, gMinute)
	// 1 unit is free, so 2 more must leave: the 3 of t=0 leave at 61 s,
	// 41 s from now.
	if rl.RetryAfter < 40*time.Second || rl.RetryAfter > 42*time.Second {
		t.Fatalf("RetryAfter for 3 with 1 free = %v, want about 41s (the first send leaving)", rl.RetryAfter)
	}
	if st := state(t, th, ""); st.PerMinute.Used != 9 || st.PerMinute.InFlight != 0 {
		t.Fatalf("after the refusal: %+v, want used 9, nothing taken", st.PerMinute)
	}
	commit(t, reserveN(t, th, "", 1)) // the one free unit is still there
	rl = refusedN(t, th, "", 4, gMinute)
	// 4 with 0 free: the 3 of t=0 leave at 61 s, not enough; the 3 of
	// t=10 at 71 s.
	if rl.RetryAfter < 50*time.Second || rl.RetryAfter > 52*time.Second {
		t.Fatalf("RetryAfter for 4 with 0 free = %v, want about 51s (two sends leaving)", rl.RetryAfter)
	}
	b.Advance(rl.RetryAfter - 2*time.Second)
	refusedN(t, th, "", 4, gMinute)
	b.Advance(2 * time.Second)
	commit(t, reserveN(t, th, "", 4))
}

// testWeightAboveLimit: a cost above a window's limit could never be
// admitted: it is a *TooLargeError naming the window and its limit, not a
// refusal to retry, and it takes nothing.
func testWeightAboveLimit(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 10, PerHour: 100}, throttle.Limits{PerHour: 5})
	for _, c := range []struct {
		inbox string
		n     int
		want  throttle.Window
		limit int
	}{{"", 11, gMinute, 10}, {"a", 6, iHour, 5}} {
		tk, err := th.Reserve(ctx, throttle.Request{Inbox: c.inbox, Lease: lease, Cost: c.n})
		var tl *throttle.TooLargeError
		if !errors.As(err, &tl) {
			if tk != nil {
				_, _ = tk.Release(ctx)
			}
			t.Fatalf("Reserve(%q, cost %d) = %v, want a *TooLargeError", c.inbox, c.n, err)
		}
		if tl.Window != c.want || tl.Limit != c.limit || tl.Cost != c.n {
			t.Fatalf("TooLargeError = %+v, want window %v, limit %d, cost %d", tl, c.want, c.limit, c.n)
		}
	}
	if st := state(t, th, "a"); st.PerMinute.Used+st.PerMinute.InFlight != 0 {
		t.Fatalf("inbox after the refusals: %+v, want nothing taken", st.PerMinute)
	}
	commit(t, reserveN(t, th, "a", 5))
}

// testWeightsRacing: random costs from many goroutines on three throttles
// of the same state (three servers, for a shared backend) never take more
// than the limit, and stop only when what is left is too little for each
// cost still asking.
func testWeightsRacing(t *testing.T, b Backend) {
	const limit = 50
	ths := make([]throttle.Throttle, 3)
	for i := range ths {
		ths[i] = b.New(Options{Global: throttle.Limits{PerMinute: limit}})
	}
	var (
		mu       sync.Mutex
		admitted int
		refused  []int
		wg       sync.WaitGroup
	)
	for i := range 120 {
		n := 1 + rand.IntN(5)
		wg.Go(func() {
			tk, err := ths[i%3].Reserve(ctx, throttle.Request{Lease: lease, Cost: n})
			var rl *throttle.RateLimitedError
			switch {
			case errors.As(err, &rl):
				mu.Lock()
				refused = append(refused, n)
				mu.Unlock()
				return
			case err != nil:
				t.Errorf("Reserve(cost %d): %v", n, err)
				return
			}
			if _, err := tk.Commit(ctx); err != nil {
				t.Errorf("Commit: %v", err)
				return
			}
			mu.Lock()
			admitted += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if admitted > limit {
		t.Fatalf("admitted %d units, limit %d", admitted, limit)
	}
	// The other servers' commits may still be gathered: closed, they are
	// sent.
	stop(t, ths[1])
	stop(t, ths[2])
	st := state(t, ths[0], "")
	if st.PerMinute.Used != admitted {
		t.Fatalf("used %d, admitted %d", st.PerMinute.Used, admitted)
	}
	// A refusal is right only if, when it was judged, its cost did not
	// fit; at the end, at least, the smallest cost refused must not fit.
	if len(refused) > 0 {
		smallest := refused[0]
		for _, n := range refused {
			smallest = min(smallest, n)
		}
		if left := limit - admitted; left >= smallest {
			t.Fatalf("%d units left, yet a cost of %d was refused", left, smallest)
		}
	}
}

// testSecondWindow: at 5 a second, the sixth unit waits until the
// bucket of the first has left: a second and one 100 ms bucket at most.
func testSecondWindow(t *testing.T, b Backend) {
	if b.RunningClock {
		t.Skip("the case holds sends within 100 ms of a bucket edge, and this backend's clock runs on " +
			"while the case does (see Backend.RunningClock): the edges cannot be exact")
	}
	th := newThrottle(b, throttle.Limits{PerSecond: 5}, throttle.Limits{})
	for range 5 {
		commit(t, reserveN(t, th, "", 1))
	}
	rl := refusedN(t, th, "", 1, throttle.GlobalSecond)
	if rl.RetryAfter != 2*time.Second && rl.RetryAfter != time.Second {
		t.Fatalf("RetryAfter = %v, want 1s or 2s (1.1 s, rounded up)", rl.RetryAfter)
	}
	b.Advance(time.Second)
	refusedN(t, th, "", 1, throttle.GlobalSecond)
	b.Advance(100 * time.Millisecond)
	commit(t, reserveN(t, th, "", 3))
	commit(t, reserveN(t, th, "", 2))
	refusedN(t, th, "", 1, throttle.GlobalSecond)
}

// testDayWindow: at 20 a day, the day counts across hours (the hour
// window would have forgotten), and frees at 24 h and one 15 min bucket.
//
// Each commit goes to a shared backend at once: a commit gathered when
// the clock jumps 6 h would reach the backend after its reservation's
// deadline, which counts it there too (twice, the safe side the contract
// allows), and the day, unlike the minute and the hour, still holds it.
func testDayWindow(t *testing.T, b Backend) {
	th := b.New(Options{Global: throttle.Limits{PerDay: 20}, Inbox: throttle.Limits{PerDay: 15}, SettleDelay: -1})
	commit(t, reserveN(t, th, "a", 10))
	b.Advance(6 * time.Hour)
	commit(t, reserveN(t, th, "a", 5))
	b.Advance(6 * time.Hour)
	refusedN(t, th, "a", 1, throttle.InboxDay)
	commit(t, reserveN(t, th, "b", 5))
	rl := refusedN(t, th, "c", 1, throttle.GlobalDay)
	// The 10 of t=0 leave 24 h after the end of their 15 min bucket:
	// 12 h to 12 h 15 min from now.
	if lo, hi := 12*time.Hour, 12*time.Hour+15*time.Minute+time.Second; rl.RetryAfter < lo || rl.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v, want in [%v, %v]", rl.RetryAfter, lo, hi)
	}
	if st := state(t, th, ""); st.PerDay.Used != 20 || st.PerDay.Limit != 20 || st.PerDay.Window != throttle.GlobalDay {
		t.Fatalf("per-day = %+v, want used 20 of 20", st.PerDay)
	}
	if b.RunningClock {
		t.Skip("the rest holds sends a minute from a 15 min bucket's edge, and this backend's clock runs on " +
			"(see Backend.RunningClock): its Advance moves a bucket to the one holding its last instant, " +
			"up to 15 min on the safe side, so the edge at RetryAfter cannot be exact")
	}
	b.Advance(rl.RetryAfter - time.Minute)
	refusedN(t, th, "c", 1, throttle.GlobalDay)
	b.Advance(time.Minute)
	commit(t, reserveN(t, th, "c", 10))
	refusedN(t, th, "a", 1, throttle.GlobalDay)
}
