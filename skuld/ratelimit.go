package skuld

import (
	"fmt"
	"strings"
	"sync"
	"time"
)

// A GlobalRateLimiter enforces the global send throttle: in any interval of
// 60 seconds at most perMinute sends succeed, and in any interval of 3600
// seconds at most perHour, however many goroutines send at once. A limit of 0
// leaves that window unlimited.
//
// A send is admitted with Reserve before the provider is called. The
// Reservation counts as in flight, so concurrent callers cannot all pass a
// check that none of them has recorded yet. When the provider answers, the
// caller Commits the reservation (the send counts at the commit moment) or
// Releases it (the send failed and counts nothing).
//
// Each window is a ring of fixed-width buckets (1 s for the minute, 1 min for
// the hour); a bucket counts until all of it is older than the window, so the
// limiter errs on the side of refusing for at most one bucket width.
//
// The limiter never reads the clock: every method that depends on time takes
// it as an argument, and times are expected to be roughly non-decreasing. A
// time far ahead of the others moves the windows forward for good.
//
// A GlobalRateLimiter is safe for concurrent use by multiple goroutines.
type GlobalRateLimiter struct {
	mu     sync.Mutex
	minute window
	hour   window
}

// NewGlobalRateLimiter returns a limiter allowing perMinute sends in any 60 s
// and perHour sends in any 3600 s; 0 means unlimited. It panics on a negative
// limit, which configuration validation rejects first.
func NewGlobalRateLimiter(perMinute, perHour int) *GlobalRateLimiter {
	if perMinute < 0 || perHour < 0 {
		panic(fmt.Sprintf("skuld: negative rate limit (per minute %d, per hour %d)", perMinute, perHour))
	}
	l := &GlobalRateLimiter{}
	l.minute.init(perMinute, time.Second, time.Minute)
	l.hour.init(perHour, time.Minute, time.Hour)
	return l
}

// Limits returns the configured limits; 0 means unlimited.
func (l *GlobalRateLimiter) Limits() (perMinute, perHour int) {
	return l.minute.limit, l.hour.limit
}

// Unlimited reports whether neither window has a limit.
func (l *GlobalRateLimiter) Unlimited() bool {
	return l.minute.limit == 0 && l.hour.limit == 0
}

// Reserve admits one send at now if both windows have room, counting
// committed sends and reservations in flight. On refusal it returns a
// *RateLimitedError and reserves nothing.
func (l *GlobalRateLimiter) Reserve(now time.Time) (Reservation, error) {
	t := now.UnixNano()
	l.mu.Lock()
	l.minute.advance(t)
	l.hour.advance(t)
	minuteFull, hourFull := l.minute.full(), l.hour.full()
	if minuteFull || hourFull {
		err := l.refusal(t, minuteFull, hourFull)
		l.mu.Unlock()
		return Reservation{}, err
	}
	l.minute.inFlight++
	l.hour.inFlight++
	r := Reservation{l: l, minute: l.minute.counted(), hour: l.hour.counted()}
	l.mu.Unlock()
	return r, nil
}

// refusal builds the error for the full windows; l.mu must be held.
func (l *GlobalRateLimiter) refusal(t int64, minuteFull, hourFull bool) *RateLimitedError {
	e := &RateLimitedError{Violations: make([]Violation, 0, 2)}
	var wait int64
	if minuteFull {
		e.Violations = append(e.Violations, Violation{Window: "per-minute", Count: l.minute.counted(), Limit: l.minute.limit})
		wait = l.minute.retryAfter(t)
	}
	if hourFull {
		e.Violations = append(e.Violations, Violation{Window: "per-hour", Count: l.hour.counted(), Limit: l.hour.limit})
		wait = max(wait, l.hour.retryAfter(t))
	}
	e.RetryAfter = time.Duration(ceilSeconds(wait)) * time.Second
	return e
}

// Restore counts a send that already happened at t, so that the windows
// rebuilt from the database at start-up keep the promise across a restart.
// Times older than the window (relative to the latest time the limiter has
// seen) are ignored.
func (l *GlobalRateLimiter) Restore(t time.Time) {
	ns := t.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.minute.advance(ns)
	l.hour.advance(ns)
	l.minute.add(ns)
	l.hour.add(ns)
}

// State reports both windows at now.
func (l *GlobalRateLimiter) State(now time.Time) State {
	t := now.UnixNano()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.minute.advance(t)
	l.hour.advance(t)
	return State{PerMinute: l.minute.state(t), PerHour: l.hour.state(t)}
}

// Reservation is one admitted send, in flight until it is committed or
// released. Exactly one of Commit or Release must be called, once; doing
// neither keeps the slot taken until the process ends. The zero Reservation
// does nothing.
type Reservation struct {
	l            *GlobalRateLimiter
	minute, hour int
}

// Commit records that the provider accepted the send: it counts at now and
// is no longer in flight.
func (r Reservation) Commit(now time.Time) {
	if r.l == nil {
		return
	}
	t := now.UnixNano()
	l := r.l
	l.mu.Lock()
	l.settle()
	l.minute.advance(t)
	l.hour.advance(t)
	l.minute.add(t)
	l.hour.add(t)
	l.mu.Unlock()
}

// Release gives the slot back because the send failed; it counts nothing.
func (r Reservation) Release() {
	if r.l == nil {
		return
	}
	r.l.mu.Lock()
	r.l.settle()
	r.l.mu.Unlock()
}

// settle ends one reservation; l.mu must be held. Going below zero means a
// reservation was settled twice, which would silently raise the limit, so
// like a negative sync.WaitGroup counter it panics (after unlocking, so a
// recovered panic does not wedge every later send).
func (l *GlobalRateLimiter) settle() {
	if l.minute.inFlight == 0 || l.hour.inFlight == 0 {
		l.mu.Unlock()
		panic("skuld: Reservation committed or released twice")
	}
	l.minute.inFlight--
	l.hour.inFlight--
}

// MinuteCount is the per-minute count (committed and in flight) at admission,
// this send included.
func (r Reservation) MinuteCount() int { return r.minute }

// HourCount is the per-hour count (committed and in flight) at admission,
// this send included.
func (r Reservation) HourCount() int { return r.hour }

// State is a snapshot of both windows.
type State struct {
	PerMinute, PerHour WindowState
}

// WindowState is a snapshot of one window. Counts are kept for an unlimited
// window too, so Used and InFlight stay meaningful there; Remaining is 0.
type WindowState struct {
	Limit     int // 0 = unlimited
	Used      int // committed sends still inside the window
	InFlight  int // reservations not yet committed or released
	Remaining int // max(0, Limit-Used-InFlight)
	// ResetSeconds is the whole seconds, rounded up, until a slot next
	// frees: when the window is full, its Retry-After; otherwise until the
	// oldest counted send leaves, or 0 if none is counted.
	ResetSeconds int
}

// RateLimitedError is the refusal returned by Reserve.
type RateLimitedError struct {
	// RetryAfter is when room is next expected, in whole seconds rounded
	// up, at least 1 s; the later of the two windows when both are full.
	RetryAfter time.Duration
	// Violations lists the full windows, per-minute before per-hour.
	Violations []Violation
}

// Violation is one full window at the moment of a refusal.
type Violation struct {
	Window string // "per-minute" or "per-hour"
	Count  int    // committed and in flight
	Limit  int
}

// Error returns the sentence clients read, e.g.
// "Rate limit exceeded: per-minute limit reached (5/5)".
func (e *RateLimitedError) Error() string {
	var b strings.Builder
	b.WriteString("Rate limit exceeded: ")
	for i, v := range e.Violations {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s limit reached (%d/%d)", v.Window, v.Count, v.Limit)
	}
	return b.String()
}

// RetryAfterSeconds returns RetryAfter in whole seconds, for the Retry-After header.
func (e *RateLimitedError) RetryAfterSeconds() int {
	return int(e.RetryAfter / time.Second)
}

// Windows returns the names of the full windows, e.g. ["per-minute"].
func (e *RateLimitedError) Windows() []string {
	names := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		names[i] = v.Window
	}
	return names
}
