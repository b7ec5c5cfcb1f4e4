package skuld

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// HeldWait on a fake clock: while the sends that fill a window are in
// flight it asks again every heldRecheck, whatever their leases; once they
// have committed, it waits exactly until the first of them leaves the
// window, and the throttle admits then, not a moment later.
func TestHeldWait(t *testing.T) {
	ctx := context.Background()
	c := clocktest.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	th := throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 3}, throttle.Limits{}), c)
	const lease = 90 * time.Second
	refusal := func() *throttle.RateLimitedError {
		t.Helper()
		tk, err := th.Reserve(ctx, throttle.Request{Lease: lease})
		var rl *throttle.RateLimitedError
		if !errors.As(err, &rl) {
			if tk != nil {
				_, _ = tk.Release(ctx)
			}
			t.Fatalf("Reserve = %v, want refused", err)
		}
		return rl
	}
	c.Advance(300 * time.Millisecond) // off a bucket edge
	var flying []throttle.Ticket
	for range 3 {
		tk, err := th.Reserve(ctx, throttle.Request{Lease: lease})
		if err != nil {
			t.Fatal(err)
		}
		flying = append(flying, tk)
	}
	rl := refusal()
	// Half of the README's second: the dispatch that follows has the rest.
	wait := HeldWait(rl)
	if wait <= 0 || wait > time.Second/2 {
		t.Fatalf("three sends in flight: HeldWait = %v, want at most 500ms (Retry-After %v)", wait, rl.RetryAfter)
	}

	// One fails meanwhile: the next ask, wait later, is admitted.
	c.Advance(wait / 2)
	if _, err := flying[0].Release(ctx); err != nil {
		t.Fatal(err)
	}
	c.Advance(wait - wait/2)
	tk, err := th.Reserve(ctx, throttle.Request{Lease: lease})
	if err != nil {
		t.Fatalf("a send in flight gave its slot back; the ask HeldWait later: %v, want admitted", err)
	}
	flying[0] = tk

	// All three commit at 20.8 s: bucket 20, which leaves the minute
	// window at 81 s.
	c.Advance(20800*time.Millisecond - c.Mono())
	for _, tk := range flying {
		if _, err := tk.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	c.Advance(4 * time.Second) // 24.8 s
	rl = refusal()
	want := 81*time.Second - c.Mono()
	if got := HeldWait(rl); got != want {
		t.Fatalf("three sends committed at 20.8 s, asked at %v: HeldWait = %v, want %v (Retry-After %v)", c.Mono(), got, want, rl.RetryAfter)
	}
	c.Advance(want - time.Nanosecond)
	refusal()
	c.Advance(time.Nanosecond)
	if _, err := th.Reserve(ctx, throttle.Request{Lease: lease}); err != nil {
		t.Fatalf("at the time HeldWait gave: %v, want admitted", err)
	}
}
