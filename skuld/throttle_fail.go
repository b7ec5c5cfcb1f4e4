package skuld

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"
)

// FailOpen is a Throttle that admits a send when its backend cannot be
// asked (THROTTLE_FAIL=open): availability over the promise, chosen by the
// operator. Each such send is logged at ERROR and counted (Unthrottled).
// Refusals and every other answer pass through unchanged. The default
// policy, closed, needs no wrapper: the *UnavailableError reaches the API,
// which answers 503 with Retry-After, and nothing is sent.
type FailOpen struct {
	t           Throttle
	logger      *slog.Logger
	unthrottled atomic.Int64
}

// NewFailOpen wraps t.
func NewFailOpen(t Throttle, logger *slog.Logger) *FailOpen {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &FailOpen{t: t, logger: logger}
}

// ReserveInbox implements Throttle.
func (f *FailOpen) ReserveInbox(ctx context.Context, lease time.Duration, inboxID string, o Override) (Ticket, error) {
	tk, err := f.t.ReserveInbox(ctx, lease, inboxID, o)
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return tk, err
	}
	n := f.unthrottled.Add(1)
	f.logger.ErrorContext(ctx, "throttle backend unreachable; sending unthrottled (THROTTLE_FAIL=open)",
		slog.String("backend", ue.Backend), slog.String("inbox_id", inboxID),
		slog.Int64("unthrottled_sends", n), slog.Any("error", ue.Err))
	return unthrottled{}, nil
}

// State implements Throttle.
func (f *FailOpen) State(ctx context.Context) (State, error) { return f.t.State(ctx) }

// InboxState implements Throttle.
func (f *FailOpen) InboxState(ctx context.Context, inboxID string, o Override) (State, error) {
	return f.t.InboxState(ctx, inboxID, o)
}

// States implements Throttle.
func (f *FailOpen) States(ctx context.Context, inboxID string, o Override) (State, State, error) {
	return f.t.States(ctx, inboxID, o)
}

// InboxVersion implements Throttle. A backend that cannot be asked has no
// version to give: the copy is then not cached (see store.Store.Inbox).
func (f *FailOpen) InboxVersion(ctx context.Context) (string, error) { return f.t.InboxVersion(ctx) }

// InboxesChanged implements Throttle.
func (f *FailOpen) InboxesChanged(ctx context.Context) error { return f.t.InboxesChanged(ctx) }

// Unthrottled is the number of sends admitted without the backend since
// start: the metric of THROTTLE_FAIL=open.
func (f *FailOpen) Unthrottled() int64 { return f.unthrottled.Load() }

// unthrottled is the Ticket of a send the backend never saw.
type unthrottled struct{}

func (unthrottled) Commit(context.Context) error     { return nil }
func (unthrottled) Release(context.Context) error    { return nil }
func (unthrottled) MinuteCount() int                 { return 0 }
func (unthrottled) HourCount() int                   { return 0 }
func (unthrottled) States(bool) (State, State, bool) { return State{}, State{}, false }
