package hold

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// dispatcher sends held messages for the Queue's jobs. The send itself is
// the Sender's (skuld.Sender.AdmitHeld and its Admission); the dispatcher
// decides when a message goes, claims it, and records its outcome.
type dispatcher struct {
	sender   *skuld.Sender
	store    Store
	lane     store.LaneJob // the Queue's Lane
	clock    clock.Clock
	logger   *slog.Logger
	maxAge   time.Duration
	observer Observer
}

// step is what a held message's job does after a dispatch: finish (the
// zero step), or run again after snooze, which is not a failed attempt.
// The message's own record says why and when (its status, next attempt):
// the job only waits.
type step struct {
	snooze time.Duration
}

// yield is the snooze of a lane that has more to send: it runs again
// behind the jobs already waiting, so that one inbox with thousands queued
// holds one job, not thousands, and cannot starve another inbox's mail.
const yield = time.Millisecond

// A lane's job sends up to laneBatch messages per run, and waits in the
// job for a window that has room again within laneWait; it starts no send
// after laneRun: at the limit's pace, one run per message (a snooze, a
// poll, a fetch) would fall behind the limit; and a run that ends gives
// the worker back.
const (
	laneBatch = 50
	laneWait  = time.Second
	laneRun   = 10 * time.Second
)

// unavailableSnooze is how long a job waits for a throttle backend that
// cannot be asked.
const unavailableSnooze = 5 * time.Second

// dispatchDue sends the scheduled message id, due at due, if it still is:
// a message canceled, rescheduled (due at another time), already
// dispatched or gone is left alone. If its inbox's lane has queued mail,
// or its windows are full, it joins the lane, in the order of its due time.
// rescued says the job ran before and may have been cut off by the death
// of its server: the message's send is recovered first, if it was left
// in flight.
func (d *dispatcher) dispatchDue(ctx context.Context, id string, due time.Time, rescued bool) (step, error) {
	if rescued {
		if err := d.recover(ctx, store.RecoverScope{MessageID: id}); err != nil {
			return step{}, err
		}
	}
	m, laneBusy, err := d.store.DueMessage(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return step{}, nil
	case err != nil:
		return step{}, err
	case m.Status != store.StatusScheduled || m.ScheduledAt == nil || !m.ScheduledAt.Equal(due.UTC().Truncate(time.Microsecond)):
		return step{}, nil
	}
	now := d.clock.Now()
	if early := m.ScheduledAt.Sub(now); early > 0 {
		// In snoozes the queue keeps runnable without its leader: a job run
		// early (Queue.Start on a server alone) then runs on time even
		// while the leadership of a server that died has not expired.
		return step{snooze: min(early, RunnableSnooze)}, nil // never before its time
	}
	inbox, err := d.store.Inbox(ctx, m.InboxID)
	if errors.Is(err, store.ErrNotFound) {
		return step{}, nil // deleted with its inbox
	} else if err != nil {
		return step{}, err
	}
	if laneBusy {
		if next, busy, err := d.laneBusy(ctx, inbox.ID); err != nil {
			return step{}, err
		} else if busy {
			_, err := d.store.QueueHeld(ctx, m, next, d.lane(inbox.ID, next))
			return step{}, ignoreNotHeld(err)
		}
	}
	req, done, err := d.request(ctx, m, inbox, now)
	if done || err != nil {
		return step{}, err
	}
	a, err := d.claimAndSend(ctx, m, inbox, req, store.StatusScheduled)
	switch {
	case err != nil:
		return step{}, err
	case a.refused != nil:
		next := now.Add(skuld.HeldWait(a.refused))
		_, err := d.store.QueueHeld(ctx, m, next, d.lane(inbox.ID, next))
		return step{}, ignoreNotHeld(err)
	}
	// The step's snooze runs from now, when River gets it, not from the
	// start of this dispatch: the message shows when it is tried next, and
	// the send (a slow relay's deferral) took its time since.
	return a.step(d.clock.Now()), nil
}

// dispatchLane sends the inbox's queued messages, first due first, while
// their windows have room, for up to laneBatch messages or laneRun; then
// it yields to the other jobs, or waits for the time its windows should
// have room. It ends (end: the job completed, in a transaction that finds
// the lane empty under the lane's lock, store.EndLane) when no message is queued. rescued
// is as for dispatchDue, for the inbox's sends.
func (d *dispatcher) dispatchLane(ctx context.Context, inboxID string, rescued bool, end store.JobTx) (step, error) {
	if rescued {
		if err := d.recover(ctx, store.RecoverScope{InboxID: inboxID}); err != nil {
			return step{}, err
		}
	}
	start := d.clock.Mono()
	for sent := 0; ; {
		if sent >= laneBatch || d.clock.Mono()-start >= laneRun {
			return step{snooze: yield}, nil
		}
		m, err := d.store.LaneHead(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			if ended, err := d.store.EndLane(ctx, inboxID, end); err != nil || ended {
				return step{}, err
			}
			continue // queued meanwhile
		} else if err != nil {
			return step{}, err
		}
		inbox, err := d.store.Inbox(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			return step{}, nil
		} else if err != nil {
			return step{}, err
		}
		now := d.clock.Now()
		req, done, err := d.request(ctx, m, inbox, now)
		if err != nil {
			return step{}, err
		} else if done {
			continue
		}
		a, err := d.claimAndSend(ctx, m, inbox, req, store.StatusQueued)
		switch {
		case err != nil:
			return step{}, err
		case a.done:
			continue
		case a.refused != nil:
			wait := skuld.HeldWait(a.refused)
			leaving := wait > laneWait || d.clock.Mono()-start+wait >= laneRun
			// The message shows when it is next tried: written when the job
			// leaves to snooze, and while it waits in the job (re-asking
			// twice a second while sends in flight fill a window) only
			// once the time shown has passed by a second.
			if leaving || m.NextAttemptAt == nil || now.Sub(*m.NextAttemptAt) > time.Second {
				if err := d.store.SetNextAttempt(ctx, m.ID, now.Add(wait)); err != nil {
					return step{}, err
				}
			}
			if leaving || !d.wait(ctx, wait) {
				return step{snooze: max(wait, time.Millisecond)}, nil
			}
		case a.unavailable || !a.retryAt.IsZero():
			return a.step(d.clock.Now()), nil // as dispatchDue's
		default:
			sent++
		}
	}
}

// recover gives back, or resolves, the sends in scope that a server which
// died left in flight past their deadline (store.RecoverSends): a rescued
// job's message may be among them.
func (d *dispatcher) recover(ctx context.Context, scope store.RecoverScope) error {
	now := d.clock.Now()
	n, err := d.store.RecoverSends(ctx, scope, now, now, d.lane)
	if n > 0 {
		d.logger.WarnContext(ctx, "sends left in flight by a server that stopped resolved", slog.Int64("sends", n),
			slog.String("message_id", scope.MessageID), slog.String("inbox_id", scope.InboxID))
	}
	return err
}

// wait waits dur unless ctx ends or the Sender begins to shut down; it
// reports whether it waited the whole time.
func (d *dispatcher) wait(ctx context.Context, dur time.Duration) bool {
	t := time.NewTimer(dur)
	defer t.Stop()
	select {
	case <-t.C:
		return !d.sender.ShuttingDown()
	case <-ctx.Done():
		return false
	}
}

// laneBusy returns the due time of the inbox's first queued message, and
// whether it has any: a due message that finds it waits behind them, as a
// send that may be queued does (skuld.Sender.Send), so that an inbox's
// mail goes in the order it became due.
func (d *dispatcher) laneBusy(ctx context.Context, inboxID string) (time.Time, bool, error) {
	head, err := d.store.LaneHead(ctx, inboxID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, err
	}
	next := d.clock.Now()
	if head.NextAttemptAt != nil {
		next = *head.NextAttemptAt
	}
	return next, true, nil
}
