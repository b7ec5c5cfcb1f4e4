package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// Step is what a held message's job does after a dispatch: finish (the
// zero Step), or run again after Snooze, which is not a failed attempt.
// The message's own record says why and when (its status, next attempt):
// the job only waits.
type Step struct {
	Snooze time.Duration
}

// yield is the snooze of a lane that has more to send: it runs again
// behind the jobs already waiting, so that one inbox with thousands queued
// holds one job, not thousands, and cannot starve another inbox's mail.
const yield = time.Millisecond

// A lane's job sends up to laneBatch messages per run, and waits in the
// job for a window that has room again within laneWait; it starts no send
// after LaneRun: at the limit's pace, one run per message (a snooze, a
// poll, a fetch) would fall behind the limit; and a run that ends gives
// the worker back.
const (
	laneBatch = 50
	laneWait  = time.Second
	LaneRun   = 10 * time.Second
)

// unavailableSnooze is how long a job waits for a throttle backend that
// cannot be asked.
const unavailableSnooze = 5 * time.Second

// DispatchDue sends the scheduled message id, due at due, if it still is:
// a message canceled, rescheduled (due at another time), already
// dispatched or gone is left alone. If its inbox's lane has queued mail,
// or its windows are full, it joins the lane, in the order of its due time.
// rescued says the job ran before and may have been cut off by the death
// of its server: the message's send is recovered first, if it was left
// in flight.
func (s *Sender) DispatchDue(ctx context.Context, id string, due time.Time, rescued bool) (Step, error) {
	h := s.o.Hold
	if rescued {
		if err := s.recover(ctx, store.RecoverScope{MessageID: id}); err != nil {
			return Step{}, err
		}
	}
	m, laneBusy, err := h.Store.DueMessage(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Step{}, nil
	case err != nil:
		return Step{}, err
	case m.Status != store.StatusScheduled || m.ScheduledAt == nil || !m.ScheduledAt.Equal(due.UTC().Truncate(time.Microsecond)):
		return Step{}, nil
	}
	now := s.o.Clock.Now()
	if early := m.ScheduledAt.Sub(now); early > 0 {
		// In snoozes the queue keeps runnable without its leader: a job run
		// early (hold.Queue.Start on a server alone) then runs on time even
		// while the leadership of a server that died has not expired.
		return Step{Snooze: min(early, h.earlyMax())}, nil // never before its time
	}
	inbox, err := s.o.Store.Inbox(ctx, m.InboxID)
	if errors.Is(err, store.ErrNotFound) {
		return Step{}, nil // deleted with its inbox
	} else if err != nil {
		return Step{}, err
	}
	if laneBusy {
		if next, busy, err := s.laneBusy(ctx, inbox.ID); err != nil {
			return Step{}, err
		} else if busy {
			_, err := h.Store.QueueHeld(ctx, m, next, h.Jobs.Lane(inbox.ID, next))
			return Step{}, ignoreNotHeld(err)
		}
	}
	req, done, err := s.settleUnsendable(ctx, m, inbox, now)
	if done || err != nil {
		return Step{}, err
	}
	a, err := s.claimAndSend(ctx, m, inbox, req, store.StatusScheduled)
	switch {
	case err != nil:
		return Step{}, err
	case a.refused != nil:
		next := now.Add(heldWait(a.refused))
		_, err := h.Store.QueueHeld(ctx, m, next, h.Jobs.Lane(inbox.ID, next))
		return Step{}, ignoreNotHeld(err)
	}
	return a.step(now), nil
}

// DispatchLane sends the inbox's queued messages, first due first, while
// their windows have room, for up to laneBatch messages or LaneRun; then
// it yields to the other jobs, or waits for the time its windows should
// have room. It ends (end: the job completed, in a transaction that finds
// the lane empty under store.LockLane) when no message is queued. rescued
// is as for DispatchDue, for the inbox's sends.
func (s *Sender) DispatchLane(ctx context.Context, inboxID string, rescued bool, end store.JobTx) (Step, error) {
	h := s.o.Hold
	if rescued {
		if err := s.recover(ctx, store.RecoverScope{InboxID: inboxID}); err != nil {
			return Step{}, err
		}
	}
	start := s.o.Clock.Mono()
	for sent := 0; ; {
		if sent >= laneBatch || s.o.Clock.Mono()-start >= LaneRun {
			return Step{Snooze: yield}, nil
		}
		m, err := h.Store.LaneHead(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			if ended, err := h.Store.EndLane(ctx, inboxID, end); err != nil || ended {
				return Step{}, err
			}
			continue // queued meanwhile
		} else if err != nil {
			return Step{}, err
		}
		inbox, err := s.o.Store.Inbox(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			return Step{}, nil
		} else if err != nil {
			return Step{}, err
		}
		now := s.o.Clock.Now()
		req, done, err := s.settleUnsendable(ctx, m, inbox, now)
		if err != nil {
			return Step{}, err
		} else if done {
			continue
		}
		a, err := s.claimAndSend(ctx, m, inbox, req, store.StatusQueued)
		switch {
		case err != nil:
			return Step{}, err
		case a.lost:
			continue
		case a.refused != nil:
			wait := heldWait(a.refused)
			leaving := wait > laneWait || s.o.Clock.Mono()-start+wait >= LaneRun
			// The message shows when it is next tried: written when the job
			// leaves to snooze, and while it waits in the job (re-asking
			// twice a second while sends in flight fill a window) only
			// once the time shown has passed by a second.
			if leaving || m.NextAttemptAt == nil || now.Sub(*m.NextAttemptAt) > time.Second {
				if err := h.Store.SetNextAttempt(ctx, m.ID, now.Add(wait)); err != nil {
					return Step{}, err
				}
			}
			if leaving || !s.wait(ctx, wait) {
				return Step{Snooze: max(wait, time.Millisecond)}, nil
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
func (s *Sender) recover(ctx context.Context, scope store.RecoverScope) error {
	now := s.o.Clock.Now()
	n, err := s.o.Hold.Store.RecoverSends(ctx, scope, now, now, s.o.Hold.Jobs.Lane)
	if n > 0 {
		s.o.Logger.WarnContext(ctx, "sends left in flight by a server that stopped resolved", slog.Int64("sends", n),
			slog.String("message_id", scope.MessageID), slog.String("inbox_id", scope.InboxID))
	}
	return err
}

// wait waits d unless ctx ends or the Sender begins to shut down; it
// reports whether it waited the whole time.
func (s *Sender) wait(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return !s.shuttingDown()
	case <-ctx.Done():
		return false
	}
}

// settleUnsendable reads held message m's request (its recipients) and
// fails m, read at now, if it can no longer be sent: expired
// (QUEUE_MAX_AGE past its due time) or to a domain the filter now blocks.
// done reports that m needs nothing more, failed here or changed
// meanwhile; otherwise req is what claimAndSend sends.
func (s *Sender) settleUnsendable(ctx context.Context, m *store.Message, inbox *store.Inbox, now time.Time) (req SendRequest, done bool, err error) {
	h := s.o.Hold
	reason := ""
	if now.Sub(dueTime(m)) > h.maxAge() {
		reason = expiredError
		s.o.Logger.WarnContext(ctx, "held message expired", slog.String("message_id", m.ID))
	} else if req, err = heldRequest(m, inbox); err != nil {
		return req, false, err
	} else if err := s.checkDomains(ctx, req); err != nil {
		var blocked *BlockedError
		if !errors.As(err, &blocked) {
			return req, false, err
		}
		reason = blocked.Error()
	}
	if reason == "" {
		return req, false, nil
	}
	_, err = h.Store.FailHeld(ctx, m, reason)
	return req, true, ignoreNotHeld(err)
}

// attempt is what claimAndSend did with a held message; the zero attempt
// sent it (or failed it for good) and recorded that.
type attempt struct {
	refused     *throttle.RateLimitedError // the windows are full: nothing taken, nothing written
	unavailable bool                       // the throttle could not be asked
	lost        bool                       // a cancel or reschedule came first: it is theirs
	retryAt     time.Time                  // the provider failed temporarily: held again until then
}

// step is the job's Step after a that was not refused.
func (a attempt) step(now time.Time) Step {
	switch {
	case a.unavailable:
		return Step{Snooze: unavailableSnooze}
	case !a.retryAt.IsZero():
		return Step{Snooze: max(a.retryAt.Sub(now), time.Millisecond)}
	}
	return Step{}
}

// claimAndSend sends held message m now, if its windows have room: it
// claims m at the version it was read at (so a cancel or reschedule
// answered meanwhile wins), sends it, and records the outcome. A
// temporary provider failure puts it back with status held (scheduled or
// queued) and a next attempt, which the message's record is the one source
// of: the job waits until then.
func (s *Sender) claimAndSend(ctx context.Context, m *store.Message, inbox *store.Inbox, req SendRequest, held string) (attempt, error) {
	h := s.o.Hold
	id, ok := s.enter(m.Size)
	if !ok {
		return attempt{unavailable: true}, nil // taken up again by the next start
	}
	defer s.leave(id)
	lease := s.o.Budget.Lease(m.Size)
	reserved := s.o.Clock.Mono()
	tk, err := s.o.Throttle.Reserve(ctx, throttle.Request{Inbox: InboxKey(inbox), Override: InboxOverride(inbox), Lease: lease})
	var rl *throttle.RateLimitedError
	switch {
	case errors.As(err, &rl):
		return attempt{refused: rl}, nil
	case err != nil:
		s.o.Logger.WarnContext(ctx, "throttle unavailable; held message waits", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{unavailable: true}, nil
	}
	// The content is read once the send is admitted: a refusal costs none.
	// A message whose size is its bodies' has none to read.
	if m.Size > len(m.Text)+len(m.HTML) {
		if req.Attachments, err = s.heldAttachments(ctx, m.ID); err != nil {
			s.settle(ctx, tk.Release, m.ID)
			return attempt{}, err
		}
	}
	ctx = context.WithoutCancel(ctx) // from the claim on, the send finishes and is recorded
	leave, err := s.sending(ctx, inbox.ID)
	if err != nil {
		s.settle(ctx, tk.Release, m.ID)
		return attempt{}, err
	}
	defer leave()
	at := s.o.Clock.Now().UTC()
	slot := &store.SendSlot{Scope: InboxKey(inbox), ReservedAt: at, Deadline: at.Add(lease)}
	// Claimed only once the provider has a connection for it, just before
	// its bytes go: a server that dies while the message waits for one has
	// claimed nothing, and the message's job, rescued, sends it.
	claimed, claimErr := false, error(nil)
	handover := &providers.HandoverTrace{HandedOver: func() error {
		if !claimed {
			if claimErr = h.Store.ClaimHeld(ctx, m, slot); claimErr != nil {
				return fmt.Errorf("%w: %w", errHandoverRefused, claimErr)
			}
			claimed = true
		}
		return nil
	}}
	providerID, sendErr := s.tries(ctx, providerMessage(m, inbox, req), reserved+lease, m, handover)
	switch {
	case errors.Is(claimErr, store.ErrNotHeld) || errors.Is(claimErr, store.ErrNotFound):
		s.settle(ctx, tk.Release, m.ID)
		return attempt{lost: true}, nil // canceled, rescheduled or gone meanwhile: it wins
	case claimErr != nil:
		s.settle(ctx, tk.Release, m.ID)
		return attempt{}, claimErr
	case !claimed:
		// The provider never had a connection for it: nothing went,
		// nothing was written. It stays held as it was.
		s.settle(ctx, tk.Release, m.ID)
		s.o.Logger.WarnContext(ctx, "provider busy; held message waits", slog.String("message_id", m.ID), slog.Any("error", sendErr))
		return attempt{unavailable: true}, nil
	}
	if sendErr != nil && temporary(sendErr) && s.o.Clock.Now().Sub(dueTime(m)) < h.maxAge() {
		// Not taken: held again as it was, and tried again at next. Past
		// QUEUE_MAX_AGE from its due time, that attempt finds it expired.
		s.settle(ctx, tk.Release, m.ID)
		next := retryTime(m, s.o.Clock.Now())
		s.o.Logger.InfoContext(ctx, "provider failed temporarily; held message retried later", slog.String("message_id", m.ID),
			slog.String("cause", providers.Cause(sendErr)), slog.Time("next_attempt_at", next))
		if err := h.Store.FinishHeld(ctx, m.ID, store.Outcome{Status: held, NextAttemptAt: &next}); err != nil {
			return attempt{}, err
		}
		return attempt{retryAt: next}, nil
	}
	out, _ := s.conclude(ctx, tk, m, providerID, sendErr)
	if err := h.Store.FinishHeld(ctx, m.ID, out); err != nil {
		// As in deliver: the row stays "sending", resolved by the recovery
		// of sends left in flight.
		s.o.Logger.ErrorContext(ctx, "record held send outcome", slog.String("message_id", m.ID), slog.Any("error", err))
		return attempt{}, err
	}
	if h.Observer != nil && m.ScheduledAt != nil {
		h.Observer.Dispatched(at.Sub(*m.ScheduledAt))
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

// HoldObserver is told the lateness of each held message sent: the time it
// was sent less the time it was scheduled for.
type HoldObserver interface {
	Dispatched(lateness time.Duration)
}

func (h *Hold) earlyMax() time.Duration {
	if h.EarlyMax <= 0 {
		return time.Second
	}
	return h.EarlyMax
}

func (h *Hold) maxAge() time.Duration {
	if h.MaxAge <= 0 {
		return 24 * time.Hour
	}
	return h.MaxAge
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
func heldRequest(m *store.Message, inbox *store.Inbox) (SendRequest, error) {
	req := SendRequest{MessageID: m.ID, InboxID: m.InboxID, Inbox: inbox, Subject: m.Subject}
	for _, l := range []struct {
		dst *[]address.Address
		src store.StringList
	}{{&req.To, m.ToAddresses}, {&req.Cc, m.CcAddresses}, {&req.Bcc, m.BccAddresses}, {&req.ReplyTo, m.ReplyToAddresses}} {
		for _, raw := range l.src {
			a, err := address.Parse(raw)
			if err != nil {
				return req, fmt.Errorf("skuld: held message %s: stored address: %w", m.ID, err)
			}
			*l.dst = append(*l.dst, a)
		}
	}
	return req, nil
}

// heldAttachments reads a held message's attachments with their content.
func (s *Sender) heldAttachments(ctx context.Context, id string) ([]providers.Attachment, error) {
	rows, err := s.o.Hold.Store.Attachments(ctx, store.AttachmentFilter{MessageID: id})
	if err != nil || len(rows) == 0 {
		return nil, err
	}
	out := make([]providers.Attachment, len(rows))
	for i, r := range rows {
		content, err := s.o.Hold.Store.AttachmentContent(ctx, r.ID)
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
