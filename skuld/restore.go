package skuld

import (
	"context"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
	"github.com/nornweave/nornweave/store"
)

// ThrottleLog is the durable record the throttle is rebuilt from: the
// store's send_log, which deleting an inbox does not touch.
type ThrottleLog interface {
	ResolveInterrupted(ctx context.Context, now time.Time, lane store.LaneJob) (int64, error)
	CountedSends(ctx context.Context, since time.Time) ([]store.CountedSend, error)
	PendingSends(ctx context.Context, now time.Time) ([]store.PendingSend, error)
}

// restoreSpan is how far back a restart, or a shared backend's rebuild,
// looks: the day window plus one bucket, since a bucket counts until all
// of it has left the window. The shared backends keep the day too.
const restoreSpan = throttle.Longest

// RestoreThrottle keeps the in-memory throttle's promise across a restart.
// First the sends a stopped server left in flight are resolved: each may
// have gone out until its deadline or until the server stopped, so it
// counts from the earlier of its deadline and now, for good. Then every
// send counted within restoreSpan counts again in l, globally and in its
// inbox's windows. It returns how many sends it restored and how many were
// interrupted. A send interrupted while it waited for the provider is given
// back instead (store.ResolveInterrupted), a held one queued again with its
// lane's job written by lane. It must run before the server sends.
func RestoreThrottle(ctx context.Context, log ThrottleLog, l *throttle.GlobalRateLimiter, c clock.Clock,
	lane store.LaneJob) (restored int, interrupted int64, err error) {
	now := c.Now()
	if interrupted, err = log.ResolveInterrupted(ctx, now, lane); err != nil {
		return 0, 0, err
	}
	sends, err := log.CountedSends(ctx, now.Add(-restoreSpan))
	if err != nil {
		return 0, interrupted, err
	}
	for _, s := range sends {
		// A clock that was ahead when the row was written must not push
		// the windows into the future.
		l.Restore(clock.MonoAt(c, minTime(s.At, now)), s.Scope, s.Cost)
	}
	return len(sends), interrupted, nil
}

// ThrottleRecord reads what a shared throttle's lost state is rebuilt from
// (shared.Options.Rebuild): the sends counted within restoreSpan of
// now, and those in flight, until their deadline plus the backend's margin.
func ThrottleRecord(ctx context.Context, log ThrottleLog, now time.Time, margin time.Duration) (throttledriver.Record, error) {
	sent, err := log.CountedSends(ctx, now.Add(-restoreSpan))
	if err != nil {
		return throttledriver.Record{}, err
	}
	pending, err := log.PendingSends(ctx, now)
	if err != nil {
		return throttledriver.Record{}, err
	}
	// A send of several units (recipients) is that many slots, as the
	// backend admitted it.
	var rec throttledriver.Record
	for _, s := range sent {
		for range max(s.Cost, 1) {
			rec.Sent = append(rec.Sent, throttledriver.Sent{Inbox: s.Scope, At: minTime(s.At, now)})
		}
	}
	for _, p := range pending {
		for range max(p.Cost, 1) {
			rec.Pending = append(rec.Pending, throttledriver.Pending{Inbox: p.Scope, Deadline: p.Deadline.Add(margin)})
		}
	}
	return rec, nil
}

func minTime(a, b time.Time) time.Time {
	if a.After(b) {
		return b
	}
	return a
}
