package skuld

import (
	"context"
	"database/sql"
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
// zero Step; when the dispatch recorded the message's fate, it completed
// the job in that transaction), run again after Snooze, which is not a
// failed attempt, or fail this attempt with Retry, to be retried with
// backoff.
type Step struct {
	Snooze time.Duration
	Retry  error
	// again: a lane's dispatch found its message needed nothing more
	// (canceled, expired, blocked) and goes on to the next; finished: it
	// recorded the message's outcome. Neither is returned to the runner.
	again, finished bool
}

// A lane's job sends up to laneBatch messages per run, and waits in the
// job for a window that has room again within laneWait; it starts no send
// after LaneRun: at the limit's pace, one run per message (a snooze, a poll, a
// fetch) would fall behind the limit; and a run that ends gives the worker
// back, so an inbox with thousands queued holds one worker for a batch at
// a time.
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
// complete completes the job inside the transaction that records the
// message's fate. retryAt, called when the attempt fails (Step.Retry),
// says when the job will run again, which the message shows as its next
// attempt.
func (s *Sender) DispatchDue(ctx context.Context, id string, due time.Time, complete store.Completion, retryAt func() time.Time) (Step, error) {
	h := s.o.Hold
	m, laneBusy, err := h.Store.DueMessage(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return Step{}, nil
	case err != nil:
		return Step{}, err
	case m.Status != store.StatusScheduled || m.ScheduledAt == nil || !m.ScheduledAt.Equal(due.UTC().Truncate(time.Microsecond)):
		// A job rescued after a crash finds its message "sending": the
		// outcome is unknown and it is never sent again; start-up (or the
		// shared throttle's expiry) marks it failed, delivery unknown.
		return Step{}, nil
	}
	if early := m.ScheduledAt.Sub(s.o.Clock.Now()); early > 0 {
		return Step{Snooze: early}, nil // never before its time
	}
	inbox, err := s.o.Store.Inbox(ctx, m.InboxID)
	if errors.Is(err, store.ErrNotFound) {
		return Step{}, nil // deleted with its inbox
	} else if err != nil {
		return Step{}, err
	}
	if !laneBusy {
		return s.dispatch(ctx, m, inbox, complete, true, retryAt)
	}
	if next, busy, err := s.laneBusy(ctx, inbox.ID); err != nil {
		return Step{}, err
	} else if busy {
		_, err := h.Store.QueueHeld(ctx, id, next, both(h.Jobs.Lane(inbox.ID, next), complete.Tx))
		return Step{}, ignoreNotHeld(err)
	}
	return s.dispatch(ctx, m, inbox, complete, true, retryAt)
}

// DispatchLane sends the first queued message of the inbox's lane, if its
// windows have room; otherwise it asks to be run again when they should.
// complete completes the job and enqueues the lane's next one, inside the
// transaction that records the message's fate. retryAt is as for
// DispatchDue.
func (s *Sender) DispatchLane(ctx context.Context, inboxID string, complete store.Completion, retryAt func() time.Time) (Step, error) {
	h := s.o.Hold
	start := s.o.Clock.Mono()
	for sent := 0; ; {
		m, err := h.Store.LaneHead(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			return Step{}, nil
		} else if err != nil {
			return Step{}, err
		}
		inbox, err := s.o.Store.Inbox(ctx, inboxID)
		if errors.Is(err, store.ErrNotFound) {
			return Step{}, nil
		} else if err != nil {
			return Step{}, err
		}
		// The batch's last message completes the job with its outcome, and
		// enqueues the lane's next run behind the other inboxes' jobs.
		last := sent+1 >= laneBatch || s.o.Clock.Mono()-start >= LaneRun
		job := store.NoCompletion
		if last {
			job = complete
		}
		step, err := s.dispatch(ctx, m, inbox, job, false, retryAt)
		switch {
		case err != nil || step.Retry != nil:
			return step, err
		case step.Snooze > 0:
			if step.Snooze > laneWait || s.o.Clock.Mono()-start+step.Snooze >= LaneRun || !s.wait(ctx, step.Snooze) {
				return step, nil
			}
		case step.finished && last:
			return Step{}, nil
		case step.finished:
			sent++
		}
	}
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

// dispatch sends held message m now if its windows have room. own says
// the job is the message's own (a scheduled message's); else it is its
// inbox's lane's, which goes on to the next message when this one needs
// nothing more (Step.again). A scheduled message the throttle refuses
// joins its lane, queued; a queued one waits for the time the throttle
// names.
func (s *Sender) dispatch(ctx context.Context, m *store.Message, inbox *store.Inbox, complete store.Completion, own bool,
	retryAt func() time.Time) (Step, error) {
	h := s.o.Hold
	now := s.o.Clock.Now()
	due := dueTime(m)
	if now.Sub(due) > h.maxAge() {
		_, err := h.Store.FailHeld(ctx, m.ID, expiredError, finishing(own, complete))
		s.o.Logger.WarnContext(ctx, "held message expired", slog.String("message_id", m.ID))
		return Step{again: !own}, ignoreNotHeld(err)
	}
	req, err := heldRequest(m, inbox)
	if err != nil {
		return Step{}, err
	}
	if err := s.checkDomains(ctx, req); err != nil {
		var blocked *BlockedError
		if !errors.As(err, &blocked) {
			return Step{}, err
		}
		_, err = h.Store.FailHeld(ctx, m.ID, blocked.Error(), finishing(own, complete))
		return Step{again: !own}, ignoreNotHeld(err)
	}

	id, ok := s.enter(m.Size)
	if !ok {
		return Step{Snooze: time.Second}, nil // taken up again by the next start
	}
	defer s.leave(id)
	lease := s.o.Budget.Lease(m.Size)
	reserved := s.o.Clock.Mono()
	tk, err := s.o.Throttle.Reserve(ctx, throttle.Request{Inbox: InboxKey(inbox), Override: InboxOverride(inbox), Lease: lease})
	var rl *throttle.RateLimitedError
	switch {
	case errors.As(err, &rl) && own:
		next := now.Add(heldWait(rl))
		_, err := h.Store.QueueHeld(ctx, m.ID, next, both(h.Jobs.Lane(inbox.ID, next), complete.Tx))
		return Step{}, ignoreNotHeld(err)
	case errors.As(err, &rl):
		wait := heldWait(rl)
		if err := h.Store.SetNextAttempt(ctx, m.ID, now.Add(wait)); err != nil {
			return Step{}, err
		}
		return Step{Snooze: max(wait, time.Millisecond)}, nil
	case err != nil:
		s.o.Logger.WarnContext(ctx, "throttle unavailable; held message waits", slog.String("message_id", m.ID), slog.Any("error", err))
		return Step{Snooze: unavailableSnooze}, nil
	}
	// The content is read once the send is admitted: a refusal costs none.
	// A message whose size is its bodies' has none to read.
	if m.Size > len(m.Text)+len(m.HTML) {
		if req.Attachments, err = s.heldAttachments(ctx, m.ID); err != nil {
			s.settle(ctx, tk.Release, m.ID)
			return Step{}, err
		}
	}
	ctx = context.WithoutCancel(ctx) // from the claim on, the send finishes and is recorded
	leave, err := s.sending(ctx, inbox.ID)
	if err != nil {
		s.settle(ctx, tk.Release, m.ID)
		return Step{}, err
	}
	defer leave()
	at := s.o.Clock.Now().UTC()
	slot := &store.SendSlot{Scope: InboxKey(inbox), ReservedAt: at, Deadline: at.Add(lease)}
	if err := h.Store.ClaimHeld(ctx, m, slot); err != nil {
		s.settle(ctx, tk.Release, m.ID)
		if errors.Is(err, store.ErrNotHeld) || errors.Is(err, store.ErrNotFound) {
			return Step{again: !own}, nil // canceled (or rescheduled) meanwhile: it wins
		}
		return Step{}, err
	}
	providerID, sendErr := s.tries(ctx, providerMessage(m, inbox, req), reserved+lease, m)
	if sendErr != nil && temporary(sendErr) && s.o.Clock.Now().Sub(due) < h.maxAge() {
		// Not taken: held again as it was (a lane's message queued, first
		// in its lane by its due time; a scheduled one scheduled), and this
		// attempt fails, for the job runner's backoff. QUEUE_MAX_AGE past
		// its due time, the next attempt finds it expired.
		s.settle(ctx, tk.Release, m.ID)
		status := store.StatusQueued
		if own {
			status = store.StatusScheduled
		}
		s.o.Logger.InfoContext(ctx, "provider failed temporarily; held message retried later", slog.String("message_id", m.ID),
			slog.String("cause", providers.Cause(sendErr)))
		next := retryAt()
		if err := h.Store.FinishHeld(ctx, m.ID, store.Outcome{Status: status, NextAttemptAt: &next}, store.NoCompletion); err != nil {
			return Step{}, err
		}
		return Step{Retry: fmt.Errorf("skuld: message %s: %w", m.ID, sendErr)}, nil
	}
	out, _ := s.conclude(ctx, tk, m, providerID, sendErr)
	if err := h.Store.FinishHeld(ctx, m.ID, out, complete); err != nil {
		// As in deliver: the row stays "sending", resolved at start-up.
		s.o.Logger.ErrorContext(ctx, "record held send outcome", slog.String("message_id", m.ID), slog.Any("error", err))
		return Step{}, err
	}
	if h.Observer != nil && m.ScheduledAt != nil {
		h.Observer.Dispatched(at.Sub(*m.ScheduledAt))
	}
	return Step{finished: true}, nil
}

// HoldObserver is told the lateness of each held message sent: the time it
// was sent less the time it was scheduled for.
type HoldObserver interface {
	Dispatched(lateness time.Duration)
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

// both runs a then b in the same transaction.
func both(a, b store.JobTx) store.JobTx {
	return func(ctx context.Context, tx *sql.Tx) error {
		if err := a(ctx, tx); err != nil {
			return err
		}
		return b(ctx, tx)
	}
}

// finishing is complete for a scheduled message's own job, which the
// message's failure finishes; a lane's job goes on to the next message
// instead.
func finishing(own bool, complete store.Completion) store.JobTx {
	if own {
		return complete.Tx
	}
	return store.NoCompletion.Tx
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
	req := SendRequest{MessageID: m.ID, InboxID: inbox.ID, Inbox: inbox, Subject: m.Subject}
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
