// Package throttletest is the conformance suite every skuld.Throttle
// backend runs: the promise, reservations, bucket edges, Retry-After,
// restarts, lease reclaim and concurrency, as one contract for all
// backends (like database/sql/driver's and gocloud.dev's driver tests).
//
// Time moves only through Backend.Advance, so no test waits for the clock
// or fails on a slow machine. A shared backend's own clock still runs
// while a test does (milliseconds); every assertion keeps a margin of a
// second from a bucket edge.
package throttletest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld"
)

// Backend is one backend's shared state, fresh for one test.
type Backend struct {
	// New returns a throttle on this state with the global limits and the
	// inbox defaults. Two calls in one test are two servers on the same
	// state (for a shared backend, a restart or a second instance).
	New func(global, inbox skuld.Limits) skuld.Throttle
	// Advance moves the clock every throttle of this state reads by d.
	Advance func(d time.Duration)
	// Margin is what the backend adds to a lease before it reclaims.
	Margin time.Duration
	// ChangeInbox changes an inbox as a PATCH on another server would
	// (and tells the throttle, where the backend cannot see it itself);
	// set on a shared backend.
	ChangeInbox func()
	// Shared reports state that outlives a throttle: the restart and
	// lease-reclaim cases run only then. The in-memory backend keeps its
	// state in the process; its restart is the send_log's (RestoreThrottle)
	// and a lost reservation there is a programming error, not a crash.
	Shared bool
}

// Run runs the suite; newBackend is called once per case.
func Run(t *testing.T, newBackend func(t *testing.T) Backend) {
	cases := []struct {
		name   string
		shared bool
		run    func(t *testing.T, b Backend)
	}{
		{"AdmitsAndRefusesEveryWindow", false, testWindows},
		{"RefusalTakesNothing", false, testRefusalTakesNothing},
		{"ReleaseFrees", false, testReleaseFrees},
		{"CommitCounts", false, testCommitCounts},
		{"BucketEdges", false, testBucketEdges},
		{"RetryAfterWithSendsInFlight", false, testRetryAfterInFlight},
		{"BindingWindow", false, testBinding},
		{"TicketStatesMatchARead", false, testTicketStates},
		{"Restart", true, testRestart},
		{"LeaseReclaim", true, testLeaseReclaim},
		{"StaleInboxCopy", true, testStaleInbox},
		{"ConcurrentGlobal", false, testConcurrentGlobal},
		{"ConcurrentInboxes", false, testConcurrentInboxes},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend(t)
			if c.shared && !b.Shared {
				t.Log("state does not outlive the throttle in this backend; see Backend.Shared")
				return
			}
			c.run(t, b)
		})
	}
}

var ctx = context.Background()

const lease = 10 * time.Second

func reserve(t *testing.T, th skuld.Throttle, inbox string) skuld.Ticket {
	t.Helper()
	tk, err := th.ReserveInbox(ctx, lease, inbox, skuld.Override{})
	if err != nil {
		t.Fatalf("ReserveInbox(%q): %v, want admitted", inbox, err)
	}
	return tk
}

func refused(t *testing.T, th skuld.Throttle, inbox string, windows ...string) *skuld.RateLimitedError {
	t.Helper()
	tk, err := th.ReserveInbox(ctx, lease, inbox, skuld.Override{})
	var rl *skuld.RateLimitedError
	if !errors.As(err, &rl) {
		if tk != nil {
			_ = tk.Release(ctx)
		}
		t.Fatalf("ReserveInbox(%q) = %v, want refused by %v", inbox, err, windows)
	}
	if got := rl.Windows(); !equal(got, windows) {
		t.Fatalf("refused by %v, want %v", got, windows)
	}
	if rl.RetryAfter < time.Second {
		t.Fatalf("RetryAfter = %v, want at least 1s", rl.RetryAfter)
	}
	return rl
}

func commit(t *testing.T, tk skuld.Ticket) {
	t.Helper()
	if err := tk.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func state(t *testing.T, th skuld.Throttle, inbox string) skuld.State {
	t.Helper()
	var (
		st  skuld.State
		err error
	)
	if inbox == "" {
		st, err = th.State(ctx)
	} else {
		st, err = th.InboxState(ctx, inbox, skuld.Override{})
	}
	if err != nil {
		t.Fatalf("State(%q): %v", inbox, err)
	}
	return st
}

// stop does what a server does to its throttle when it shuts down: a
// backend that gathers commits (PostgreSQL's) sends them.
func stop(t *testing.T, th skuld.Throttle) {
	t.Helper()
	if f, ok := th.(interface{ Flush(context.Context) error }); ok {
		if err := f.Flush(ctx); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
}

func equal(a, b []string) bool {
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

func testWindows(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 3, PerHour: 4}, skuld.Limits{PerMinute: 1})
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, "a"))
	refused(t, th, "a", "inbox per-minute")
	commit(t, reserve(t, th, ""))
	refused(t, th, "", "per-minute")
	b.Advance(62 * time.Second)
	commit(t, reserve(t, th, "b"))
	refused(t, th, "c", "per-hour")
}

func testRefusalTakesNothing(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 5}, skuld.Limits{PerMinute: 1})
	commit(t, reserve(t, th, "a"))
	for range 3 {
		refused(t, th, "a", "inbox per-minute")
	}
	st := state(t, th, "")
	if got := st.PerMinute.Used + st.PerMinute.InFlight; got != 1 {
		t.Fatalf("global count after 3 refusals = %d, want 1", got)
	}
	for range 4 {
		commit(t, reserve(t, th, ""))
	}
	refused(t, th, "", "per-minute")
}

func testReleaseFrees(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 1}, skuld.Limits{PerMinute: 1})
	tk := reserve(t, th, "a")
	refused(t, th, "", "per-minute")
	if err := tk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	commit(t, reserve(t, th, "a"))
	if st := state(t, th, "a"); st.PerMinute.Used != 1 || st.PerMinute.InFlight != 0 {
		t.Fatalf("inbox state = %+v, want used 1, in flight 0", st.PerMinute)
	}
}

func testCommitCounts(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 3, PerHour: 10}, skuld.Limits{})
	commit(t, reserve(t, th, ""))
	held := reserve(t, th, "")
	if held.MinuteCount() != 2 || held.HourCount() != 2 {
		t.Fatalf("counts at admission = %d/%d, want 2/2", held.MinuteCount(), held.HourCount())
	}
	st := state(t, th, "")
	want := skuld.WindowState{Limit: 3, Used: 1, InFlight: 1, Remaining: 1}
	got := st.PerMinute
	got.ResetSeconds = 0
	if got != want {
		t.Fatalf("per-minute state = %+v, want %+v", got, want)
	}
	if st.PerMinute.ResetSeconds < 59 || st.PerMinute.ResetSeconds > 62 {
		t.Fatalf("per-minute reset = %d s, want about 61", st.PerMinute.ResetSeconds)
	}
	g, in, err := th.States(ctx, "a", skuld.Override{})
	if err != nil {
		t.Fatalf("States: %v", err)
	}
	if g.PerMinute.Used != 1 || g.PerMinute.InFlight != 1 || in.PerMinute != (skuld.WindowState{}) {
		t.Fatalf("States = %+v, %+v; want the global state above and an untouched inbox", g.PerMinute, in.PerMinute)
	}
	commit(t, held)
	if st := state(t, th, ""); st.PerHour.Used != 2 || st.PerHour.InFlight != 0 || st.PerHour.Remaining != 8 {
		t.Fatalf("per-hour state = %+v, want used 2, remaining 8", st.PerHour)
	}
}

func testBucketEdges(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 2}, skuld.Limits{})
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, ""))
	b.Advance(59 * time.Second)
	refused(t, th, "", "per-minute")
	b.Advance(2 * time.Second) // 61 s: the bucket of t=0 has left
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, ""))
	refused(t, th, "", "per-minute")
}

func testRetryAfterInFlight(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 1}, skuld.Limits{})
	held := reserve(t, th, "")
	rl := refused(t, th, "", "per-minute")
	// It may commit as late as its lease (plus the backend's margin), and
	// then counts for a minute and a bucket.
	lo, hi := lease+time.Minute, lease+b.Margin+time.Minute+2*time.Second
	if rl.RetryAfter < lo || rl.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v with a send in flight for %v, want in [%v, %v]", rl.RetryAfter, lease, lo, hi)
	}
	b.Advance(lease - time.Second)
	commit(t, held)
	b.Advance(rl.RetryAfter - lease + time.Second)
	commit(t, reserve(t, th, ""))
}

func testBinding(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 1}, skuld.Limits{PerHour: 1})
	commit(t, reserve(t, th, "a"))
	rl := refused(t, th, "a", "per-minute", "inbox per-hour")
	if got := rl.Binding().Window; got != "inbox per-hour" {
		t.Fatalf("binding window = %q, want inbox per-hour (it frees last)", got)
	}
	if rl.RetryAfter < time.Hour {
		t.Fatalf("RetryAfter = %v, want the hour window's (≥ 1h)", rl.RetryAfter)
	}
}

func testRestart(t *testing.T, b Backend) {
	lim := skuld.Limits{PerMinute: 3}
	first := b.New(lim, lim)
	commit(t, reserve(t, first, "a"))
	commit(t, reserve(t, first, "a"))
	reserve(t, first, "a") // in flight when the server stops
	stop(t, first)
	second := b.New(lim, lim)
	st := state(t, second, "a")
	if st.PerMinute.Used != 2 || st.PerMinute.InFlight != 1 {
		t.Fatalf("a new instance sees %+v, want used 2, in flight 1", st.PerMinute)
	}
	refused(t, second, "", "per-minute")
}

func testLeaseReclaim(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 1}, skuld.Limits{PerMinute: 1})
	reserve(t, th, "a") // its server dies: never committed nor released
	b.Advance(lease - time.Second)
	refused(t, th, "", "per-minute")
	if st := state(t, th, ""); st.PerMinute.InFlight != 1 {
		t.Fatalf("before its lease ends: %+v, want 1 in flight", st.PerMinute)
	}
	// Past the lease: it may have gone out at its deadline, so it counts
	// from then, for a whole window.
	b.Advance(b.Margin + 2*time.Second)
	refused(t, th, "", "per-minute")
	refused(t, th, "a", "per-minute", "inbox per-minute")
	if st := state(t, th, ""); st.PerMinute.InFlight != 0 || st.PerMinute.Used != 1 {
		t.Fatalf("after its lease: %+v, want counted (used 1), not in flight", st.PerMinute)
	}
	b.Advance(58 * time.Second) // deadline + 59 s
	refused(t, th, "", "per-minute")
	b.Advance(3 * time.Second) // deadline + 62 s
	commit(t, reserve(t, th, "a"))
}

func testConcurrentGlobal(t *testing.T, b Backend) {
	const limit, n = 20, 300
	th := b.New(skuld.Limits{PerMinute: limit, PerHour: 1000}, skuld.Limits{})
	admitted := hammer(t, th, n, func(int) string { return "" })
	if admitted != limit {
		t.Fatalf("%d of %d concurrent sends admitted, want exactly %d", admitted, n, limit)
	}
}

func testConcurrentInboxes(t *testing.T, b Backend) {
	const perInbox, n = 5, 300
	inboxes := []string{"i0", "i1", "i2", "i3"}
	th := b.New(skuld.Limits{}, skuld.Limits{PerMinute: perInbox})
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
func hammer(t *testing.T, th skuld.Throttle, n int, inbox func(int) string) int {
	t.Helper()
	var (
		admitted atomic.Int64
		wg       sync.WaitGroup
		start    = make(chan struct{})
		errs     = make(chan error, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			tk, err := th.ReserveInbox(ctx, lease, inbox(i), skuld.Override{})
			var rl *skuld.RateLimitedError
			switch {
			case errors.As(err, &rl):
				return
			case err != nil:
				errs <- err
				return
			}
			admitted.Add(1)
			if err := tk.Commit(ctx); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent send: %v", err)
	}
	return int(admitted.Load())
}

// testTicketStates checks what a Ticket reports of the windows its admission
// saw (a send's rate-limit headers) against a read of the state after it
// settled: equal, but for a reset that may be a second later (it is counted
// from the admission). A shared backend must report while no limited window
// is left full, and must not once one is.
func testTicketStates(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{PerMinute: 5, PerHour: 10}, skuld.Limits{PerMinute: 3})
	commit(t, reserve(t, th, "a"))
	commit(t, reserve(t, th, "b"))
	// Commits a backend still gathers are in flight to an admission.
	stop(t, th)
	b.Advance(10 * time.Second)
	other := reserve(t, th, "b") // in flight throughout
	defer func() { _ = other.Release(ctx) }()

	check := func(name string, tk skuld.Ticket, counted bool) {
		t.Helper()
		g, in, ok := tk.States(counted)
		if !ok {
			if b.Shared {
				t.Fatalf("%s: a shared backend's ticket reported nothing with room left", name)
			}
			return
		}
		wg, win, err := th.States(ctx, "a", skuld.Override{})
		if err != nil {
			t.Fatalf("States: %v", err)
		}
		for _, p := range []struct {
			what      string
			got, want skuld.WindowState
		}{
			{"global per-minute", g.PerMinute, wg.PerMinute}, {"global per-hour", g.PerHour, wg.PerHour},
			{"inbox per-minute", in.PerMinute, win.PerMinute}, {"inbox per-hour", in.PerHour, win.PerHour},
		} {
			reset := p.got.ResetSeconds - p.want.ResetSeconds
			p.got.ResetSeconds = p.want.ResetSeconds
			if p.got != p.want || reset < 0 || reset > 1 {
				t.Fatalf("%s: ticket reports %s %+v (reset %+d s), a read gives %+v", name, p.what, p.got, reset, p.want)
			}
		}
	}
	tk := reserve(t, th, "a")
	commit(t, tk)
	check("committed", tk, true)
	tk = reserve(t, th, "a")
	if err := tk.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	check("released", tk, false)

	// The inbox's third send leaves its minute window full.
	tk = reserve(t, th, "a")
	commit(t, tk)
	if _, _, ok := tk.States(true); ok {
		t.Fatal("a ticket reported the windows with one left full; its reset needs a full read")
	}
}

// testStaleInbox: an admission judged on a copy of an inbox read before
// another server changed one is refused with ErrStaleInbox, taking nothing;
// a copy read since, at the new version, is judged as usual.
func testStaleInbox(t *testing.T, b Backend) {
	th := b.New(skuld.Limits{}, skuld.Limits{PerMinute: 1})
	v, err := th.InboxVersion(ctx)
	if err != nil {
		t.Fatalf("InboxVersion: %v", err)
	}
	tk, err := th.ReserveInbox(ctx, lease, "a", skuld.Override{Version: v})
	if err != nil {
		t.Fatalf("ReserveInbox at the current version: %v", err)
	}
	if err := tk.Release(ctx); err != nil {
		t.Fatal(err)
	}
	b.ChangeInbox()
	if tk, err = th.ReserveInbox(ctx, lease, "a", skuld.Override{Version: v}); !errors.Is(err, skuld.ErrStaleInbox) {
		if tk != nil {
			_ = tk.Release(ctx)
		}
		t.Fatalf("ReserveInbox with a copy from before a change: %v, want ErrStaleInbox", err)
	}
	v2, err := th.InboxVersion(ctx)
	if err != nil || v2 == v {
		t.Fatalf("InboxVersion after a change = %q, %v; want other than %q", v2, err, v)
	}
	if st := state(t, th, "a"); st.PerMinute.Used != 0 || st.PerMinute.InFlight != 0 {
		t.Fatalf("the stale admission took %+v", st.PerMinute)
	}
	two := b.New(skuld.Limits{}, skuld.Limits{PerMinute: 1}) // another server
	tk, err = two.ReserveInbox(ctx, lease, "a", skuld.Override{Version: v2})
	if err != nil {
		t.Fatalf("ReserveInbox at the new version: %v", err)
	}
	commit(t, tk)
	if _, err := th.ReserveInbox(ctx, lease, "a", skuld.Override{Version: v2}); !errors.As(err, new(*skuld.RateLimitedError)) {
		t.Fatalf("second send at the new version: %v, want refused by the inbox's limit", err)
	}
}
