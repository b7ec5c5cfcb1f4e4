package throttletest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// testCancelled: a caller that has given up takes nothing and is told so
// with its own context's error, never as a backend that cannot be asked
// (which THROTTLE_FAIL=open would admit unthrottled).
func testCancelled(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1}, throttle.Limits{})
	gone, cancel := context.WithCancel(ctx)
	cancel()
	tk, err := th.Reserve(gone, throttle.Request{Lease: lease})
	if !errors.Is(err, context.Canceled) || errors.As(err, new(*throttle.UnavailableError)) {
		if tk != nil {
			_, _ = tk.Release(ctx)
		}
		t.Fatalf("Reserve with a cancelled context = %v, want context.Canceled", err)
	}
	commit(t, reserve(t, th, ""))
}

// testAbandoned: callers that give up while their admission is on its way
// (the backend is slow to answer) are answered at once with their
// context's error, are not admitted, and leave nothing behind: a
// reservation the backend makes for one later is given back.
//
// The backend stays silent until every caller has been answered, so
// "at once" means "before the backend said anything", and an admission
// seen meanwhile can only be a spare one, which needs no call.
func testAbandoned(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1000}, throttle.Limits{})
	// Connections open before the stall, so that requests are written and
	// the backend acts on them after it.
	warm := hammer(t, th, 40, func(int) string { return "" })
	resume := func() {}
	if b.Stall != nil {
		resume = b.Stall()
	}
	const n = 100
	var (
		wg      sync.WaitGroup
		tickets = make(chan throttle.Ticket, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			patience := time.Duration(5+rand.IntN(100)) * time.Millisecond
			c, cancel := context.WithTimeout(ctx, patience)
			defer cancel()
			if i%5 == 0 {
				cancel() // given up before asking, for some
			}
			tk, err := th.Reserve(c, throttle.Request{Lease: lease})
			if err == nil {
				tickets <- tk
			}
		}()
	}
	answered := make(chan struct{})
	go func() { wg.Wait(); close(answered) }()
	select {
	case <-answered:
	case <-time.After(time.Minute): // a bound on a hang, not a measure of speed
		resume()
		t.Fatal("callers that gave up were still waiting for a silent backend a minute later")
	}
	resume()
	close(tickets)
	committed := 0
	for tk := range tickets {
		if _, err := tk.Commit(ctx); err == nil {
			committed++
		}
	}
	stop(t, th) // what a server does when it stops: what is under way ends, what is held is sent
	st := state(t, newThrottle(b, throttle.Limits{PerMinute: 1000}, throttle.Limits{}), "")
	if want := committed + warm; st.PerMinute.InFlight != 0 || st.PerMinute.Used != want {
		t.Fatalf("after %d callers gave up or sent: %+v; want used %d, nothing in flight", n, st.PerMinute, want)
	}
}

// testRefusalSnapshotGlobal: a refusal names windows that were full, with the
// counts that filled them, however fast slots are taken and given back
// around it: its numbers come from the state that refused, not a second
// read.
func testRefusalSnapshotGlobal(t *testing.T, b Backend) {
	refusalSnapshot(t, b, throttle.Limits{PerMinute: 1}, throttle.Limits{}, gMinute)
}

// testRefusalSnapshotInbox is testRefusalSnapshotGlobal for an inbox's
// hour window, with no global limit: a made-up refusal would read
// "per-minute limit reached (0/0)".
func testRefusalSnapshotInbox(t *testing.T, b Backend) {
	refusalSnapshot(t, b, throttle.Limits{}, throttle.Limits{PerHour: 1}, iHour)
}

func refusalSnapshot(t *testing.T, b Backend, global, inbox throttle.Limits, window throttle.Window) {
	th := newThrottle(b, global, inbox)
	var (
		wg   sync.WaitGroup
		bad  = make(chan string, 1)
		seen atomic.Int64
	)
	report := func(msg string) {
		select {
		case bad <- msg:
		default:
		}
	}
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 40 {
				tk, err := th.Reserve(ctx, throttle.Request{Inbox: "a", Lease: lease})
				var rl *throttle.RateLimitedError
				switch {
				case err == nil:
					_, _ = tk.Release(ctx)
				case errors.As(err, &rl):
					seen.Add(1)
					if v := rl.Violations; len(v) != 1 || v[0].Window != window || v[0].Limit != 1 || v[0].Count < 1 {
						report(rl.Error())
					}
				default:
					report(err.Error())
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	if msg, ok := <-bad; ok {
		t.Fatalf("a refusal while slots came and went said %q; want %v full (1/1)", msg, window)
	}
	if seen.Load() == 0 {
		t.Log("no refusal happened; the case proved nothing this run")
	}
}

func testConcurrentGlobal(t *testing.T, b Backend) {
	const limit, n = 20, 300
	th := newThrottle(b, throttle.Limits{PerMinute: limit, PerHour: 1000}, throttle.Limits{})
	admitted := hammer(t, th, n, func(int) string { return "" })
	if admitted != limit {
		t.Fatalf("%d of %d concurrent sends admitted, want exactly %d", admitted, n, limit)
	}
}

func testConcurrentInboxes(t *testing.T, b Backend) {
	const perInbox, n = 5, 300
	inboxes := []string{"i0", "i1", "i2", "i3"}
	th := newThrottle(b, throttle.Limits{}, throttle.Limits{PerMinute: perInbox})
	admitted := hammer(t, th, n, func(i int) string { return inboxes[i%len(inboxes)] })
	if admitted != perInbox*len(inboxes) {
		t.Fatalf("%d of %d concurrent sends admitted, want exactly %d", admitted, n, perInbox*len(inboxes))
	}
	for _, in := range inboxes {
		if st := state(t, th, in); st.PerMinute.Used != perInbox {
			t.Fatalf("inbox %s used %d, want %d", in, st.PerMinute.Used, perInbox)
		}
	}
}

// hammer runs n goroutines that each reserve (from inbox(i)) and commit,
// and returns how many were admitted; any error but a refusal fails.
func hammer(t *testing.T, th throttle.Throttle, n int, inbox func(int) string) int {
	t.Helper()
	admitted, unavailable := hammerThrough(t, th, n, inbox)
	for _, err := range unavailable {
		t.Fatalf("concurrent send: %v", err)
	}
	return admitted
}

// hammerThrough is hammer that returns the errors of a backend found
// unavailable (a call that timed out on a starved machine) instead of
// failing on them; any other error but a refusal fails the test.
func hammerThrough(t *testing.T, th throttle.Throttle, n int, inbox func(int) string) (admitted int, unavailable []error) {
	t.Helper()
	var (
		count atomic.Int64
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make(chan error, 2*n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox(i), Lease: lease})
			var rl *throttle.RateLimitedError
			switch {
			case errors.As(err, &rl):
				return
			case err != nil:
				errs <- err
				return
			}
			count.Add(1)
			if _, err := tk.Commit(ctx); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		var down *throttle.UnavailableError
		if !errors.As(err, &down) {
			t.Errorf("concurrent send: %v", err)
			continue
		}
		unavailable = append(unavailable, err)
	}
	return int(count.Load()), unavailable
}
