package shared_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// The helpers of throttletest that Shared's own cases use.

var ctx = context.Background()

const lease = 10 * time.Second

var iMinute = throttle.InboxMinute

func reserve(t *testing.T, th throttle.Throttle, inbox string) throttle.Ticket {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: lease})
	if err != nil {
		t.Fatalf("Reserve(%q): %v, want admitted", inbox, err)
	}
	return tk
}

func refused(t *testing.T, th throttle.Throttle, inbox string, windows ...throttle.Window) {
	t.Helper()
	tk, err := th.Reserve(ctx, throttle.Request{Inbox: inbox, Lease: lease})
	var rl *throttle.RateLimitedError
	if !errors.As(err, &rl) {
		if tk != nil {
			_, _ = tk.Release(ctx)
		}
		t.Fatalf("Reserve(%q) = %v, want refused by %v", inbox, err, windows)
	}
	got := rl.Windows()
	if len(got) != len(windows) {
		t.Fatalf("refused by %v, want %v", got, windows)
	}
	for i := range got {
		if got[i] != windows[i] {
			t.Fatalf("refused by %v, want %v", got, windows)
		}
	}
	if rl.RetryAfter < time.Second {
		t.Fatalf("RetryAfter = %v, want at least 1s", rl.RetryAfter)
	}
	for _, v := range rl.Violations {
		var st throttle.WindowState
		for _, w := range rl.Snapshot.States() {
			if w.Window == v.Window {
				st = w
			}
		}
		if st.Limit != v.Limit || st.Used+st.InFlight != v.Count || st.Remaining != 0 ||
			time.Duration(st.ResetSeconds)*time.Second != v.RetryAfter {
			t.Fatalf("refusal's snapshot has %+v for violation %+v", st, v)
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

// state reads the global windows, or inbox's.
func state(t *testing.T, th throttle.Throttle, inbox string) throttle.Pair {
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

// hammerThrough sends n at once and commits each admitted; it returns the
// errors of a backend found unavailable instead of failing on them; any
// other error but a refusal fails the test.
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
