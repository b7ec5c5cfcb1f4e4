package throttle

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
)

// FailOpen is a Throttle that admits a send when its backend cannot be
// asked (THROTTLE_FAIL=open): availability over the promise, chosen by the
// operator. Each such send is logged at ERROR and counted (Unthrottled).
// Refusals, and a caller that gave up, pass through unchanged: a cancelled
// request takes nothing and admits nothing. The default policy, closed,
// needs no wrapper: the *UnavailableError reaches the API, which answers
// 503 with Retry-After, and nothing is sent.
type FailOpen struct {
	Throttle
	logger      *slog.Logger
	unthrottled atomic.Int64
}

// NewFailOpen wraps t.
func NewFailOpen(t Throttle, logger *slog.Logger) *FailOpen {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &FailOpen{Throttle: t, logger: logger}
}

// Reserve implements Throttle.
func (f *FailOpen) Reserve(ctx context.Context, r Request) (Ticket, error) {
	tk, err := f.Throttle.Reserve(ctx, r)
	var ue *UnavailableError
	if !errors.As(err, &ue) {
		return tk, err
	}
	if cerr := ctx.Err(); cerr != nil {
		return nil, cerr
	}
	n := f.unthrottled.Add(1)
	f.logger.ErrorContext(ctx, "throttle backend unreachable; sending unthrottled (THROTTLE_FAIL=open)",
		slog.String("backend", ue.Backend), slog.Int64("unthrottled_sends", n), slog.Any("error", ue.Err))
	return unthrottled{}, nil
}

// Unthrottled is the number of sends admitted without the backend since
// start: the metric of THROTTLE_FAIL=open.
func (f *FailOpen) Unthrottled() int64 { return f.unthrottled.Load() }

// unthrottled is the Ticket of a send the backend never saw. It reports no
// limited window, so its answer carries no rate-limit headers.
type unthrottled struct{}

func (unthrottled) Commit(context.Context) (Snapshot, error)  { return Snapshot{}, nil }
func (unthrottled) Release(context.Context) (Snapshot, error) { return Snapshot{}, nil }
