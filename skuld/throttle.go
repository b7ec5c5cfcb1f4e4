package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// A Throttle admits sends under the throttle's promise: at most the
// configured number of sends in any 60 s and any 3600 s, globally and per
// inbox, across every server that shares it. It is what the send pipeline
// and the API use; the backends are the in-memory limiter (one server,
// MemoryThrottle) and the shared ones, whose state lives in PostgreSQL or
// Redis so that several servers keep one promise between them.
//
// Every backend has the semantics of GlobalRateLimiter: a send needs room in
// every window that applies and is admitted by all or refused with nothing
// taken; a Ticket counts while in flight; Commit counts the send, Release
// gives the slot back. A shared backend also reclaims the Ticket of a server
// that died: when its lease (plus the backend's margin) has run out, it
// counts as a send made at that moment, since it may have gone out, and
// leaves the windows like any other send. A crash therefore never eats
// quota for good and never lets the windows overshoot.
//
// Errors other than *RateLimitedError mean the backend could not be asked:
// they are *UnavailableError, which the fail policy (FailOpen, or the API's
// 503) decides about. Implementations are safe for concurrent use.
type Throttle interface {
	// ReserveInbox admits one send from inboxID (with override o; "" for
	// none) that will be committed or released within lease.
	ReserveInbox(ctx context.Context, lease time.Duration, inboxID string, o Override) (Ticket, error)
	// State reports the global windows.
	State(ctx context.Context) (State, error)
	// InboxState reports the windows of inboxID with override o.
	InboxState(ctx context.Context, inboxID string, o Override) (State, error)
	// States reports both at once, as a send's rate-limit headers need
	// them: one read of a shared backend instead of two.
	States(ctx context.Context, inboxID string, o Override) (global, inbox State, err error)

	// Servers sharing a backend cache inboxes; the backend keeps the
	// version of all inboxes, which moves with every change. A copy read
	// at InboxVersion is passed to ReserveInbox as Override.Version, and
	// a stale copy is refused with ErrStaleInbox. The in-memory throttle
	// (one server, whose cache is always current) has no versions: "".

	// InboxVersion reports the current version of the inboxes.
	InboxVersion(ctx context.Context) (string, error)
	// InboxesChanged moves the version after a change of an inbox has
	// been committed, where the backend cannot see the change itself.
	InboxesChanged(ctx context.Context) error
}

// ErrStaleInbox refuses an admission judged on a copy of an inbox that
// another server has changed since (Override.Version): nothing was
// reserved; read the inbox again and retry.
var ErrStaleInbox = errors.New("skuld: inbox changed since it was read")

// A Ticket is one admitted send, in flight until Commit or Release; exactly
// one of them must be called, once.
type Ticket interface {
	// Commit counts the send (it went out, or may have) now.
	Commit(ctx context.Context) error
	// Release gives the slot back: the send certainly failed.
	Release(ctx context.Context) error
	// MinuteCount and HourCount are the global counts at admission, this
	// send included.
	MinuteCount() int
	HourCount() int
	// States reports the global and the inbox's windows as the admission
	// saw them, with this send counted (counted) or given back, for the
	// send's rate-limit headers; ok false means the backend cannot tell
	// without asking again (the in-memory throttle, asked at once, never
	// says).
	States(counted bool) (global, inbox State, ok bool)
}

// UnavailableError is a shared throttle backend that could not be asked.
// Nothing was reserved.
type UnavailableError struct {
	Backend string // "postgres" or "redis"
	Err     error
}

// Error names the backend and the cause.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("skuld: throttle backend %s unavailable: %v", e.Backend, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// MemoryThrottle is the Throttle of one server: a GlobalRateLimiter read
// on a Clock's monotonic axis. It never fails and adds nothing to the
// limiter's zero-allocation path but the Ticket's box.
type MemoryThrottle struct {
	l *GlobalRateLimiter
	c Clock
}

// NewMemoryThrottle returns l as a Throttle driven by c.
func NewMemoryThrottle(l *GlobalRateLimiter, c Clock) *MemoryThrottle {
	return &MemoryThrottle{l: l, c: c}
}

// ReserveInbox implements Throttle.
func (m *MemoryThrottle) ReserveInbox(_ context.Context, lease time.Duration, inboxID string, o Override) (Ticket, error) {
	r, err := m.l.ReserveInbox(m.c.Mono(), lease, inboxID, o)
	if err != nil {
		return nil, err
	}
	return &memTicket{r: r, c: m.c}, nil
}

// State implements Throttle.
func (m *MemoryThrottle) State(context.Context) (State, error) { return m.l.State(m.c.Mono()), nil }

// InboxState implements Throttle.
func (m *MemoryThrottle) InboxState(_ context.Context, inboxID string, o Override) (State, error) {
	return m.l.InboxState(m.c.Mono(), inboxID, o), nil
}

// InboxVersion implements Throttle: one server has no versions.
func (m *MemoryThrottle) InboxVersion(context.Context) (string, error) { return "", nil }

// InboxesChanged implements Throttle: nothing to tell.
func (m *MemoryThrottle) InboxesChanged(context.Context) error { return nil }

// States implements Throttle.
func (m *MemoryThrottle) States(_ context.Context, inboxID string, o Override) (State, State, error) {
	now := m.c.Mono()
	return m.l.State(now), m.l.InboxState(now, inboxID, o), nil
}

type memTicket struct {
	r Reservation
	c Clock
}

func (t *memTicket) Commit(context.Context) error     { t.r.Commit(t.c.Mono()); return nil }
func (t *memTicket) Release(context.Context) error    { t.r.Release(); return nil }
func (t *memTicket) MinuteCount() int                 { return t.r.MinuteCount() }
func (t *memTicket) HourCount() int                   { return t.r.HourCount() }
func (t *memTicket) States(bool) (State, State, bool) { return State{}, State{}, false }

// settle commits or releases a Ticket. A shared backend that cannot be
// reached leaves the reservation in flight; it is reclaimed, counted, when
// its lease runs out, so the promise holds and only quota is lost for a
// while.
func (s *Sender) settle(ctx context.Context, f func(context.Context) error, messageID string) {
	if err := f(ctx); err != nil {
		s.o.Logger.ErrorContext(ctx, "settle throttle reservation; it counts until its lease ends",
			slog.String("message_id", messageID), slog.Any("error", err))
	}
}
