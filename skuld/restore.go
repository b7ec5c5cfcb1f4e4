package skuld

import (
	"context"
	"time"

	"github.com/nornweave/nornweave/store"
)

// ThrottleLog is the durable record the throttle is rebuilt from at
// start-up: the store's send_log, which deleting an inbox does not touch.
type ThrottleLog interface {
	ResolveInterrupted(ctx context.Context, now time.Time) (int64, error)
	CountedSends(ctx context.Context, since time.Time) ([]store.CountedSend, error)
}

// restoreSpan is how far back a restart looks: the hour window plus one
// bucket, since a bucket counts until all of it has left the window.
const restoreSpan = 61 * time.Minute

// RestoreThrottle keeps the throttle's promise across a restart. First the
// sends a stopped server left in flight are resolved: each may have gone
// out until its deadline or until the server stopped, so it counts from the
// earlier of its deadline and now, for good. Then every send counted within
// restoreSpan counts again in l, globally and in its inbox's windows. It returns how many sends it restored and
// how many were interrupted. It must run before the server sends.
func RestoreThrottle(ctx context.Context, log ThrottleLog, l *GlobalRateLimiter, c Clock) (restored int, interrupted int64, err error) {
	now := c.Now()
	if interrupted, err = log.ResolveInterrupted(ctx, now); err != nil {
		return 0, 0, err
	}
	sends, err := log.CountedSends(ctx, now.Add(-restoreSpan))
	if err != nil {
		return 0, interrupted, err
	}
	for _, s := range sends {
		// A clock that was ahead when the row was written must not push
		// the windows into the future.
		l.RestoreInbox(MonoAt(c, minTime(s.At, now)), s.InboxID)
	}
	return len(sends), interrupted, nil
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}
