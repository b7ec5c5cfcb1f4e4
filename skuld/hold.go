package skuld

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// HeldStore is what accepting and changing held messages needs from
// persistence, beyond Store; package hold's jobs dispatch them.
type HeldStore interface {
	CreateHeldMessage(ctx context.Context, m *store.Message, atts []store.Attachment, newThread *store.Thread, job store.JobTx) error
	CancelHeld(ctx context.Context, id string) (*store.Message, error)
	RescheduleHeld(ctx context.Context, id string, at time.Time, job store.JobTx) (*store.Message, error)
	LaneHead(ctx context.Context, inboxID string) (*store.Message, error)
}

// Jobs writes the jobs that dispatch held messages (package hold does it
// with River), each returned as a store.JobTx so that it is written in the
// transaction that changes the message.
type Jobs interface {
	// Due is the job that sends scheduled message id at at, if it is
	// still scheduled for then.
	Due(id string, at time.Time) store.JobTx
	// Lane makes sure the inbox's lane has a job, runnable from at, that
	// sends its queued messages; a lane has one job at most.
	Lane(inboxID string, at time.Time) store.JobTx
}

// Hold configures held sends: scheduled ones and those queued when
// throttled. The Sender accepts them, records each with its job, and
// cancels or reschedules them; package hold's jobs send them (AdmitHeld).
// A Sender without Hold refuses them (ErrNoHold).
type Hold struct {
	Store HeldStore
	Jobs  Jobs
}

// ErrNoHold refuses a scheduled or queued send on a Sender without Hold.
var ErrNoHold = errors.New("skuld: held sends are not configured")

// Schedule accepts req to be sent at at: it is loaded, checked against the
// domain filter and rendered now, like a send, and recorded as scheduled
// with the job that will send it, in one transaction. It takes nothing
// from the throttle. Errors are Send's, without the throttle's.
func (s *Sender) Schedule(ctx context.Context, req SendRequest, at time.Time) (Result, error) {
	if s.o.Hold == nil {
		return Result{}, ErrNoHold
	}
	id, ok := s.enter(0)
	if !ok {
		return Result{}, ErrShuttingDown
	}
	defer s.leave(id)
	inbox, thread, parent, err := s.load(ctx, req)
	if err != nil {
		return Result{}, err
	}
	if err := s.screen(ctx, req); err != nil {
		return Result{}, err
	}
	at = at.UTC()
	m, err := s.hold(ctx, req, inbox, thread, parent, store.StatusScheduled, at, nil)
	return Result{Message: m}, err
}

// queue records req as queued in its inbox's lane, expected to have room
// at next: a throttled send that asked to be queued (rl is the refusal,
// recorded with it), or one sent behind its inbox's queue or at once
// (nil).
func (s *Sender) queue(ctx context.Context, req SendRequest, inbox *store.Inbox, thread *store.Thread, parent *store.Message, next time.Time, rl *throttle.RateLimitedError) (Result, error) {
	var (
		refusal *string
		windows throttle.Snapshot
	)
	if rl != nil {
		refusal, windows = decisionJSON(refusalDecision(s.o.Clock.Now().UTC(), s.cost(req), rl)), rl.Snapshot
	}
	m, err := s.hold(ctx, req, inbox, thread, parent, store.StatusQueued, next.UTC(), refusal)
	return Result{Message: m, Windows: windows}, err
}

// hold renders and records a held message with its job, and the
// throttle's refusal that held it, if any.
func (s *Sender) hold(ctx context.Context, req SendRequest, inbox *store.Inbox, thread *store.Thread, parent *store.Message, status string, at time.Time,
	refusal *string) (*store.Message, error) {
	// Its From is the inbox's as it is, not as a copy says.
	inbox, err := s.asItIs(ctx, inbox.ID)
	if err != nil {
		return nil, err
	}
	if err := s.checkCost(ctx, req, inbox); err != nil {
		return nil, err
	}
	m, atts, newThread, err := s.build(ctx, req, inbox, thread, parent)
	if err != nil {
		return nil, err
	}
	m.Status, m.CreatedAt, m.ThrottleRefusal = status, s.o.Clock.Now().UTC(), refusal
	var job store.JobTx
	if status == store.StatusScheduled {
		m.ScheduledAt = &at
		job = s.o.Hold.Jobs.Due(m.ID, at)
	} else {
		m.NextAttemptAt = &at
		job = s.o.Hold.Jobs.Lane(inbox.ID, at)
	}
	if newThread != nil {
		newThread.CreatedAt, newThread.LastMessageAt = m.CreatedAt, m.CreatedAt
	}
	if err := s.o.Hold.Store.CreateHeldMessage(context.WithoutCancel(ctx), m, atts, newThread, job); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
		}
		return nil, fmt.Errorf("skuld: record held message: %w", err)
	}
	return m, nil
}

// Cancel cancels a held message. It returns store.ErrNotHeld (wrapped)
// once the message is sending, sent, failed or canceled: of a cancel and a
// dispatch racing, exactly one wins (store.ClaimHeld).
func (s *Sender) Cancel(ctx context.Context, id string) (*store.Message, error) {
	if s.o.Hold == nil {
		return nil, ErrNoHold
	}
	m, err := s.o.Hold.Store.CancelHeld(ctx, id)
	if err == nil {
		s.o.Logger.InfoContext(ctx, "held message canceled", "message_id", id)
	}
	return m, err
}

// Reschedule moves a held message (scheduled or queued) to be sent at at;
// store.ErrNotHeld (wrapped) as Cancel.
func (s *Sender) Reschedule(ctx context.Context, id string, at time.Time) (*store.Message, error) {
	if s.o.Hold == nil {
		return nil, ErrNoHold
	}
	at = at.UTC()
	return s.o.Hold.Store.RescheduleHeld(ctx, id, at, s.o.Hold.Jobs.Due(id, at))
}

// laneBusy returns the due time of the inbox's first queued message, and
// whether it has any: a send that may be queued waits behind them, so
// that an inbox's mail goes in the order it was accepted.
func (s *Sender) laneBusy(ctx context.Context, inboxID string) (time.Time, bool, error) {
	head, err := s.o.Hold.Store.LaneHead(ctx, inboxID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return time.Time{}, false, nil
	case err != nil:
		return time.Time{}, false, err
	}
	next := s.o.Clock.Now()
	if head.NextAttemptAt != nil {
		next = *head.NextAttemptAt
	}
	return next, true, nil
}
