package throttle

import (
	"context"
	"fmt"
	"time"

	"github.com/nornweave/nornweave/core/clock"
)

// A Throttle admits sends under the throttle's promise: at most the
// configured number of units (messages, or recipients) in any second, 60 s,
// 3600 s and 24 h that is limited, globally and per inbox, across every
// server that shares it. A send needs room in every
// window that applies and is admitted by all or refused with nothing taken.
// Its Ticket counts while in flight; Commit counts the send, Release gives
// the slot back.
//
// Memory is the throttle of one server. shared.Throttle keeps the windows in
// PostgreSQL (pgthrottle) or Redis (redisthrottle), so that several servers
// keep one promise between them; it also reclaims the Ticket of a server
// that died: when its lease (plus a margin) has run out, it counts as a
// send made at that moment, since it may have gone out. A crash therefore
// never eats quota for good and never lets the windows overshoot.
//
// Reserve's errors are a *RateLimitedError (refused), the ctx's own error
// (the caller gave up: nothing is taken), or a *UnavailableError (the
// backend could not be asked), which the fail policy decides about
// (FailOpen, or the API's 503). Implementations are safe for concurrent
// use.
type Throttle interface {
	// Reserve admits one send.
	Reserve(ctx context.Context, r Request) (Ticket, error)
	// State reports the global windows and, unless inbox is "", those of
	// inbox with override o.
	State(ctx context.Context, inbox string, o Override) (Snapshot, error)
	// Close sends what is pending and stops the throttle's background
	// work; safe to call twice.
	Close(ctx context.Context) error
}

// Request is one send asking to be admitted.
type Request struct {
	// Inbox identifies the sending inbox's windows: its address, which is
	// what recipients and the provider see, so that deleting an inbox and
	// creating it again does not give it a fresh quota. "" for none.
	Inbox    string
	Override Override // the inbox's own limits
	// Lease is the longest the send may take: it is committed or released
	// by then, and Retry-After assumes it commits at that moment.
	Lease time.Duration
	// Cost is the units the send takes from every window, all or none: 1
	// (or 0) for a message, its unique recipients under UnitRecipient.
	Cost int
}

// A Ticket is one admitted send, in flight until Commit or Release; exactly
// one of them must be called, once. Each returns the windows as the
// admission saw them, with this send counted at the moment of the call (or
// given back): what a send's rate-limit headers describe. They are of a
// moment ago, so a reset errs late, the safe side for a client.
type Ticket interface {
	// Commit counts the send: it went out, or may have.
	Commit(ctx context.Context) (Snapshot, error)
	// Release gives the slot back: the send certainly failed.
	Release(ctx context.Context) (Snapshot, error)
}

// Memory is the Throttle of one server: a GlobalRateLimiter read on a
// clock's monotonic axis. It never fails.
type Memory struct {
	l *GlobalRateLimiter
	c clock.Clock
}

// NewMemory returns l as a Throttle driven by c.
func NewMemory(l *GlobalRateLimiter, c clock.Clock) *Memory { return &Memory{l: l, c: c} }

// Reserve implements Throttle. A caller that has given up takes nothing.
func (m *Memory) Reserve(ctx context.Context, r Request) (Ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res, err := m.l.ReserveN(m.c.Mono(), r.Lease, r.Inbox, r.Override, r.Cost)
	if err != nil {
		return nil, err
	}
	return &memTicket{m: m, r: res, inbox: r.Inbox, o: r.Override}, nil
}

// State implements Throttle.
func (m *Memory) State(_ context.Context, inbox string, o Override) (Snapshot, error) {
	return m.l.State(m.c.Mono(), inbox, o), nil
}

// Close implements Throttle: nothing to close.
func (m *Memory) Close(context.Context) error { return nil }

type memTicket struct {
	m     *Memory
	r     Reservation
	inbox string
	o     Override
}

func (t *memTicket) Commit(context.Context) (Snapshot, error) {
	now := t.m.c.Mono()
	t.r.Commit(now)
	return t.m.l.State(now, t.inbox, t.o), nil
}

func (t *memTicket) Release(context.Context) (Snapshot, error) {
	t.r.Release()
	return t.m.l.State(t.m.c.Mono(), t.inbox, t.o), nil
}

// SetLimits changes the global limits and the inbox defaults from the next
// admission on (see GlobalRateLimiter.SetLimits).
func (m *Memory) SetLimits(global, inboxDefault Limits) { m.l.SetLimits(global, inboxDefault) }

// Unit is what a throttle's limits count: each message as 1 (the
// default), or each unique recipient of it (to, cc and bcc), as Amazon SES,
// Resend and SendGrid count their quotas.
type Unit uint8

// The units (THROTTLE_UNIT).
const (
	UnitMessage Unit = iota
	UnitRecipient
)

// String returns "message" or "recipient", the names THROTTLE_UNIT takes
// and the API shows.
func (u Unit) String() string {
	if u == UnitRecipient {
		return "recipient"
	}
	return "message"
}

// ParseUnit reads a unit's name; "" is the default, UnitMessage.
func ParseUnit(s string) (Unit, error) {
	switch s {
	case "", "message":
		return UnitMessage, nil
	case "recipient":
		return UnitRecipient, nil
	}
	return 0, fmt.Errorf("throttle: unknown unit %q (message or recipient)", s)
}
