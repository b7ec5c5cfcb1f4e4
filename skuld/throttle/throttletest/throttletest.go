// Package throttletest is the conformance suite every throttle.Throttle
// backend runs: the promise, reservations, bucket edges, Retry-After,
// restarts, lease reclaim, lost state and concurrency, as one contract for
// all backends (like database/sql/driver's tests). A case a backend
// cannot support is skipped with the reason. The Driver contract under the
// shared backends has its own suite, throttledriver/drivertest; what the
// shared throttle adds over any driver (gathering, spares) is tested once,
// in package shared.
//
// Time moves only through Backend.Advance, so no test waits for the clock
// or fails on a slow machine. A backend stamped by its server's clock
// gives the suite one it moves (PostgreSQL's harness replaces
// clock_timestamp()); where the server's clock still runs while a test
// does (Redis's TIME), every assertion keeps a margin of a second from a
// bucket edge, which a machine that stalls a case for longer breaks.
package throttletest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// Options are what a case asks of a new throttle.
type Options struct {
	Global, Inbox throttle.Limits // the global limits and the inbox defaults
	// SettleDelay is how long a shared backend gathers commits far from
	// every limit; 0 to settle each at once (Settle), as -1 does also on
	// the backend whose clock is the throttle's (package shared's own).
	SettleDelay time.Duration
	// Rebuild is the durable send record a shared backend rebuilds a lost
	// state from; nil for none.
	Rebuild func(context.Context) (throttledriver.Record, error)
}

// Settle is the shared.Options.SettleDelay of o: SettleDelay, or at once
// (-1) when a case leaves it 0. A case moves the time of a shared backend
// in two steps, the throttle's clock and then the backend's; a gathered
// commit sent between the two is stamped with the one moved and the other
// not, a whole step early or late (pgthrottle's RoomAfter read 30.4 s
// where 40 were due, make test at 9ab19e8). Gathering itself is tested
// once, in package shared, on a driver whose clock is the throttle's.
func (o Options) Settle() time.Duration {
	if o.SettleDelay == 0 {
		return -1
	}
	return o.SettleDelay
}

// Backend is one backend's state, fresh for one case.
type Backend struct {
	// New returns a throttle on this state. Two calls in one case are two
	// servers on the same state (for a shared backend: a restart or a
	// second instance); each must be closed by the backend's cleanup.
	New func(o Options) throttle.Throttle
	// Advance moves the clock every throttle of this state reads by d.
	Advance func(d time.Duration)
	// Margin is what the backend adds to a lease before it reclaims.
	Margin time.Duration
	// Lose makes the backend's state vanish, as a flushed Redis; set on a
	// shared backend.
	Lose func()
	// Stall makes the backend answer nothing until resume is called, as a
	// slow network or a busy server does; nil where admission never waits.
	// A gate, not a duration: a case judges what happened while the
	// backend was silent, which a loaded machine cannot blur.
	Stall func() (resume func())
	// Weights reports a backend that counts sends of several units
	// (THROTTLE_UNIT=recipient); Spans, one that keeps the second and day
	// windows. Their cases run only then.
	Weights, Spans bool
	// RunningClock reports a backend stamped by a clock that runs on
	// while a case does (Redis's TIME: Advance shifts the stored times
	// instead). The cases keep a margin of a second from a bucket edge
	// there; one that cannot (the second's buckets are 100 ms wide)
	// skips, with the reason.
	RunningClock bool
	// Shared reports state that outlives a throttle: the cases of
	// restarts, reclaimed leases and lost state run only then. The
	// in-memory backend keeps its state in the process; its
	// restart is the send log's, and a lost reservation there is a
	// programming error, not a crash.
	Shared bool
}

// Run runs the suite; newBackend is called once per case. The cases run in
// parallel, each on the state its newBackend gave it, but for one that
// runs first, alone.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	const (
		weights = 1 + iota
		spans
	)
	cases := []struct {
		name   string
		shared bool
		needs  int // weights or spans, 0 for neither
		run    func(t *testing.T, b Backend)
	}{
		{"AdmitsAndRefusesEveryWindow", false, 0, testWindows},
		{"RefusalTakesNothing", false, 0, testRefusalTakesNothing},
		{"ReleaseFrees", false, 0, testReleaseFrees},
		{"CommitCounts", false, 0, testCommitCounts},
		{"BucketEdges", false, 0, testBucketEdges},
		{"RetryAfterWithSendsInFlight", false, 0, testRetryAfterInFlight},
		{"RoomAfter", false, 0, testRoomAfter},
		{"BindingWindow", false, 0, testBinding},
		{"TicketSnapshotMatchesARead", false, 0, testTicketSnapshot},
		{"LimitsChange", false, 0, testLimitsChange},
		{"CancelledCallerTakesNothing", false, 0, testCancelled},
		{"AbandonedAdmissionsTakeNothing", false, 0, testAbandoned},
		{"RefusalNumbersFromOneSnapshot", false, 0, testRefusalSnapshotGlobal},
		{"InboxRefusalNumbersFromOneSnapshot", false, 0, testRefusalSnapshotInbox},
		{"ConcurrentGlobal", false, 0, testConcurrentGlobal},
		{"ConcurrentInboxes", false, 0, testConcurrentInboxes},
		{"Restart", true, 0, testRestart},
		{"LeaseReclaim", true, 0, testLeaseReclaim},
		{"LostStateRebuilt", true, 0, testLostState},
		{"WeightEqualToRoom", false, weights, testWeightEqualToRoom},
		{"WeightOneOver", false, weights, testWeightOneOver},
		{"WeightAboveLimit", false, weights, testWeightAboveLimit},
		{"WeightsRacing", false, weights, testWeightsRacing},
		{"SecondWindow", false, spans, testSecondWindow},
		{"DayWindow", false, spans, testDayWindow},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			// Not parallel, AbandonedAdmissionsTakeNothing: it times callers' patience (ms) on the real clock.
			if c.name != "AbandonedAdmissionsTakeNothing" {
				t.Parallel()
			}
			b := newBackend(t)
			if c.shared && !b.Shared {
				t.Skip("the state of this backend does not outlive its throttle: restarts, leases and " +
					"lost state are the send log's (see Backend.Shared)")
			}
			if c.needs == weights && !b.Weights {
				t.Skip("this backend counts one unit per send (see Backend.Weights)")
			}
			if c.needs == spans && !b.Spans {
				t.Skip("this backend keeps the per-minute and per-hour windows only (see Backend.Spans)")
			}
			c.run(t, b)
		})
	}
}

var ctx = context.Background()

const lease = 10 * time.Second

// CallTimeout is what a backend's New gives the shared throttle's
// CallTimeout: a bound on a hang. The cases run on a fake clock, but a call
// to the backend is timed on the real one, and a flush of gathered commits
// given up is not sent again (the safe side): at the default 5 s, a loaded
// run lost a commit that way, and RoomAfter read 45.9 s (the send counted
// at its deadline) where 40 to 41 were due.
const CallTimeout = time.Minute

func newThrottle(b Backend, global, inbox throttle.Limits) throttle.Throttle {
	return b.New(Options{Global: global, Inbox: inbox})
}

func reserve(t *testing.T, th throttle.Throttle, inbox string) throttle.Ticket {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: lease})
	if err != nil {
		t.Fatalf("Reserve(%q): %v, want admitted", inbox, err)
	}
	return tk
}

func refused(t *testing.T, th throttle.Throttle, inbox string, windows ...throttle.Window) *throttle.RateLimitedError {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: lease})
	var rl *throttle.RateLimitedError
	if !errors.As(err, &rl) {
		if tk != nil {
			_, _ = tk.Release(ctx)
		}
		t.Fatalf("Reserve(%q) = %v, want refused by %v", inbox, err, windows)
	}
	if got := rl.Windows(); !equal(got, windows) {
		t.Fatalf("refused by %v, want %v", got, windows)
	}
	if rl.RetryAfter < time.Second {
		t.Fatalf("RetryAfter = %v, want at least 1s", rl.RetryAfter)
	}
	checkRefusalSnapshot(t, rl)
	return rl
}

// checkRefusalSnapshot: the windows a refusal carries for its headers are
// the ones it was judged on, so each violation reads the same in both: the
// window has less room than the send's cost, and for a cost of one it is
// full and frees at RetryAfter (a larger cost may wait for more to free).
func checkRefusalSnapshot(t *testing.T, rl *throttle.RateLimitedError) {
	t.Helper()
	cost := max(rl.Cost, 1)
	for _, v := range rl.Violations {
		var st throttle.WindowState
		for _, w := range rl.Snapshot.States() {
			if w.Window == v.Window {
				st = w
			}
		}
		reset := time.Duration(st.ResetSeconds) * time.Second
		if st.Limit != v.Limit || st.Used+st.InFlight != v.Count || st.Remaining >= cost ||
			reset > v.RetryAfter || (cost == 1 && reset != v.RetryAfter) {
			t.Fatalf("refusal's snapshot has %+v for violation %+v of a cost of %d", st, v, cost)
		}
	}
}

func commit(t *testing.T, tk throttle.Ticket) throttle.Snapshot {
	t.Helper()
	snap, err := tk.Commit(ctx)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	return snap
}

func release(t *testing.T, tk throttle.Ticket) throttle.Snapshot {
	t.Helper()
	snap, err := tk.Release(ctx)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	return snap
}

// state reads the global windows, or inbox's.
func state(t *testing.T, th throttle.Throttle, inbox string) throttle.ScopeState {
	t.Helper()
	st, err := th.State(ctx, inbox, throttle.Override{})
	if err != nil {
		t.Fatalf("State(%q): %v", inbox, err)
	}
	if inbox == "" {
		return st.Global
	}
	return st.Inbox
}

// stop does what a server does to its throttle when it shuts down.
func stop(t *testing.T, th throttle.Throttle) {
	t.Helper()
	if err := th.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func equal(a, b []throttle.Window) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

var (
	gMinute = throttle.GlobalMinute
	gHour   = throttle.GlobalHour
	iMinute = throttle.InboxMinute
	iHour   = throttle.InboxHour
)
