package hold

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
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
	return a.step(now), nil
}

// dispatchLane sends the inbox's queued messages, first due first, while
// their windows have room, for up to laneBatch messages or laneRun; then
// it yields to the other jobs, or waits for the time its windows should
// have room. It ends (end: the job completed, in a transaction that finds
// the lane empty under store.LockLane) when no message is queued. rescued
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
			return a.step(now), nil
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

// request reads held message m's request (its recipients), unless m,
// read at now, expired (QUEUE_MAX_AGE past its due time): then it fails m,
// and done reports that m needs nothing more (failed here or changed
// meanwhile). A recipient the domain filter now blocks fails it too, when
// it is admitted (claimAndSend).
func (d *dispatcher) request(ctx context.Context, m *store.Message, inbox *store.Inbox, now time.Time) (req skuld.SendRequest, done bool, err error) {
	if now.Sub(dueTime(m)) <= d.maxAge {
		req, err = heldRequest(m, inbox)
		return req, false, err
	}
	d.logger.WarnContext(ctx, "held message expired", slog.String("message_id", m.ID))
	_, err = d.store.FailHeld(ctx, m, store.ExpiredError)
	return req, true, ignoreNotHeld(err)
}

// attempt is what claimAndSend did with a held message; the zero attempt
// sent it (or failed it for good) and recorded that.
type attempt struct {
	refused     *throttle.RateLimitedError // the windows are full: nothing taken, nothing written
	unavailable bool                       // the throttle could not be asked
	done        bool                       // failed as blocked, or a cancel or reschedule came first: it is theirs
	retryAt     time.Time                  // the provider failed temporarily: held again until then
}

// step is the job's step after a that was not refused.
func (a attempt) step(now time.Time) step {
	switch {
	case a.unavailable:
		return step{snooze: unavailableSnooze}
	case !a.retryAt.IsZero():
		return step{snooze: max(a.retryAt.Sub(now), time.Millisecond)}
	}
	return step{}
}

// claimAndSend sends held message m now, if the domain filter allows its
// recipients and its windows have room: it claims m at the version it was
// read at (so a cancel or reschedule answered meanwhile wins), sends it,
// and records the outcome. A temporary provider failure puts it back with
// status held (scheduled or queued) and a next attempt, which the
// message's record is the one source of: the job waits until then.
func (d *dispatcher) claimAndSend(ctx context.Context, m *store.Message, inbox *store.Inbox, req skuld.SendRequest, held string) (attempt, error) {
	adm, err := d.sender.AdmitHeld(ctx, m, inbox, req)
	var (
		blocked *skuld.BlockedError
		rl      *throttle.RateLimitedError
	)
	switch {
	case errors.As(err, &blocked):
		_, err := d.store.FailHeld(ctx, m, blocked.Error())
		return attempt{done: true}, ignoreNotHeld(err)
	case errors.Is(err, skuld.ErrShuttingDown):
		return attempt{unavailable: true}, nil // taken up again by the next start
	case errors.As(err, &rl):
		return attempt{refused: rl}, nil
	case err != nil:
		d.logger.WarnContext(ctx, "throttle unavailable; held message waits", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{unavailable: true}, nil
	}
	defer adm.Done()
	// The content is read once the send is admitted: a refusal costs none.
	// A message whose size is its bodies' has none to read.
	if m.Size > len(m.Text)+len(m.HTML) {
		if req.Attachments, err = d.attachments(ctx, m.ID); err != nil {
			adm.Release(ctx)
			return attempt{}, err
		}
	}
	ctx = context.WithoutCancel(ctx) // from the claim on, the send finishes and is recorded
	// Claimed only once the provider has a connection for it, just before
	// its bytes go: a server that dies while the message waits for one has
	// claimed nothing, and the message's job, rescued, sends it.
	var (
		claimed  bool
		claimErr error
		at       time.Time
	)
	claim := func(slot *store.SendSlot) error {
		if !claimed {
			if claimErr = d.store.ClaimHeld(ctx, m, slot); claimErr != nil {
				return claimErr
			}
			claimed, at = true, slot.ReservedAt
		}
		return nil
	}
	providerID, sendErr := adm.Deliver(ctx, req, claim)
	switch {
	case errors.Is(claimErr, store.ErrNotHeld) || errors.Is(claimErr, store.ErrNotFound):
		adm.Release(ctx)
		return attempt{done: true}, nil // canceled, rescheduled or gone meanwhile: it wins
	case claimErr != nil:
		adm.Release(ctx)
		return attempt{}, claimErr
	case !claimed:
		// The provider never had a connection for it: nothing went,
		// nothing was written. It stays held as it was.
		adm.Release(ctx)
		d.logger.WarnContext(ctx, "provider busy; held message waits", slog.String("message_id", m.ID), slog.Any("error", sendErr))
		return attempt{unavailable: true}, nil
	}
	if sendErr != nil && skuld.Temporary(sendErr) && d.clock.Now().Sub(dueTime(m)) < d.maxAge {
		// Not taken: held again as it was, and tried again at next. Past
		// QUEUE_MAX_AGE from its due time, that attempt finds it expired.
		adm.Release(ctx)
		next := retryTime(m, d.clock.Now())
		d.logger.InfoContext(ctx, "provider failed temporarily; held message retried later", slog.String("message_id", m.ID),
			slog.String("cause", providers.Cause(sendErr)), slog.Time("next_attempt_at", next))
		if err := d.store.FinishHeld(ctx, m.ID, store.Outcome{Status: held, NextAttemptAt: &next}); err != nil {
			return attempt{}, err
		}
		return attempt{retryAt: next}, nil
	}
	out := adm.Conclude(ctx, providerID, sendErr)
	if err := d.store.FinishHeld(ctx, m.ID, out); err != nil {
		// As for a direct send: the row stays "sending", resolved by the
		// recovery of sends left in flight.
		d.logger.ErrorContext(ctx, "record held send outcome", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{}, err
	}
	if d.observer != nil && m.ScheduledAt != nil {
		d.observer.Dispatched(at.Sub(*m.ScheduledAt))
	}
	return attempt{}, nil
}

// retryTime is when a held message whose provider failed temporarily at
// now is tried again: after half the time it has waited since it became
// due, at least a second and at most an hour, so that a provider down for
// a while is asked ever less often (as River's backoff would, from the
// message's own record rather than a job's attempts).
func retryTime(m *store.Message, now time.Time) time.Time {
	return now.Add(min(max(now.Sub(dueTime(m))/2, time.Second), time.Hour))
}

// Observer is told the lateness of each held message sent: the time it
// was sent less the time it was scheduled for.
type Observer interface {
	Dispatched(lateness time.Duration)
}

// dueTime is when a held message became due: its scheduled time, or its
// acceptance for one queued at once. A lane goes in this order.
func dueTime(m *store.Message) time.Time {
	if m.ScheduledAt != nil {
		return *m.ScheduledAt
	}
	return m.CreatedAt
}

// ignoreNotHeld drops the error of a change that lost to a cancel or a
// reschedule: the message is theirs.
func ignoreNotHeld(err error) error {
	if errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// heldRequest is the request a held message was accepted from, as far as
// dispatch needs it: its recipients, parsed again from their stored
// canonical form for the domain filter and the envelope.
func heldRequest(m *store.Message, inbox *store.Inbox) (skuld.SendRequest, error) {
	req := skuld.SendRequest{MessageID: m.ID, InboxID: m.InboxID, Inbox: inbox, Subject: m.Subject}
	for _, l := range []struct {
		dst *[]address.Address
		src store.StringList
	}{{&req.To, m.ToAddresses}, {&req.Cc, m.CcAddresses}, {&req.Bcc, m.BccAddresses}, {&req.ReplyTo, m.ReplyToAddresses}} {
		for _, raw := range l.src {
			a, err := address.Parse(raw)
			if err != nil {
				return req, fmt.Errorf("hold: held message %s: stored address: %w", m.ID, err)
			}
			*l.dst = append(*l.dst, a)
		}
	}
	return req, nil
}

// attachments reads a held message's attachments with their content.
func (d *dispatcher) attachments(ctx context.Context, id string) ([]providers.Attachment, error) {
	rows, err := d.store.Attachments(ctx, store.AttachmentFilter{MessageID: id})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]providers.Attachment, len(rows))
	for i, r := range rows {
		content, err := d.store.AttachmentContent(ctx, r.ID)
		if err != nil {
			return nil, err
		}
		out[i] = providers.Attachment{Filename: r.Filename, ContentType: r.ContentType, Content: content,
			Inline: r.Disposition == "inline"}
		if r.ContentID != nil {
			out[i].ContentID = *r.ContentID
		}
	}
	return out, nil
}
