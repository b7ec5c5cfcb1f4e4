package throttle

import (
	"fmt"
	"sync"
	"time"
)

// A GlobalRateLimiter enforces the send throttle: in any interval of one
// second at most Limits.PerSecond units succeed, of 60 seconds at most
// PerMinute, of 3600 seconds at most PerHour and of 24 hours at most
// PerDay, however many goroutines send at once; and, for a send from an
// inbox, the minute, hour and day of that inbox's own (the inbox defaults,
// or the inbox's Override). A unit is a message, or one of its recipients
// (ReserveN). A limit of 0 leaves that window unlimited.
//
// A send is admitted with Reserve before the provider is called, and needs
// room in every window that applies; it is admitted by all of them or
// refused with nothing taken from any. The Reservation counts as in flight,
// so concurrent callers cannot all pass a check that none of them has
// recorded yet. When the provider answers, the caller Commits the
// reservation (the send counts at the commit moment) or Releases it (the
// send certainly failed and counts nothing).
//
// Each window is a ring of fixed-width buckets (100 ms for the second, 1 s
// for the minute, 1 min for the hour, 15 min for the day); a bucket counts
// until all of it is older than the window, so the limiter errs on the
// side of refusing for at most one bucket width.
//
// Time is monotonic and passed in, as x/time/rate's AllowN takes it: every
// method takes now as a reading of a clock.Clock's Mono, never wall time, so
// a step of the system clock cannot empty or freeze the windows. Readings
// are expected to be non-decreasing. Reserve and Commit do not allocate.
//
// The windows of an inbox idle for longer than the day and its last
// bucket (nothing counted, nothing in flight) are dropped, and come back
// empty, so memory follows the inboxes in use, not the inboxes that exist.
//
// A GlobalRateLimiter is safe for concurrent use by multiple goroutines.
type GlobalRateLimiter struct {
	mu     sync.Mutex
	global scope
	// inboxDefault is every inbox's limits unless it overrides them.
	inboxDefault Limits
	inboxes      map[string]*scope
	nextSweep    int64
}

// Limits are a scope's limits, in units (a message, or a recipient); 0
// means unlimited. An inbox's PerSecond is never used.
type Limits struct{ PerSecond, PerMinute, PerHour, PerDay int }

// of is the limit of the window of span sp.
func (lim Limits) of(sp Span) int {
	switch sp {
	case Second:
		return lim.PerSecond
	case Minute:
		return lim.PerMinute
	case Hour:
		return lim.PerHour
	}
	return lim.PerDay
}

// Override is an inbox's own limits; a nil field means the default.
type Override struct{ PerMinute, PerHour, PerDay *int }

// Apply returns lim with o's fields in place of its own.
func (o Override) Apply(lim Limits) Limits {
	if o.PerMinute != nil {
		lim.PerMinute = *o.PerMinute
	}
	if o.PerHour != nil {
		lim.PerHour = *o.PerHour
	}
	if o.PerDay != nil {
		lim.PerDay = *o.PerDay
	}
	return lim
}

// idleAfter is how long an inbox's windows outlive its last send: past the
// day window and its last bucket, they count nothing.
const idleAfter = int64(Longest)

// NewGlobalRateLimiter returns a limiter with the global limits and the
// inbox defaults. It panics on a negative limit, which configuration
// validation rejects first.
func NewGlobalRateLimiter(global, inboxDefault Limits) *GlobalRateLimiter {
	mustNotBeNegative(global)
	mustNotBeNegative(inboxDefault)
	l := &GlobalRateLimiter{inboxes: make(map[string]*scope), inboxDefault: inboxDefault}
	l.global.init(global)
	return l
}

func mustNotBeNegative(lim Limits) {
	if lim.PerSecond < 0 || lim.PerMinute < 0 || lim.PerHour < 0 || lim.PerDay < 0 {
		panic(fmt.Sprintf("throttle: negative rate limit %+v", lim))
	}
}

// SetLimits changes the global limits and the inbox defaults from the next
// call on. What is counted stays counted: lowering a limit below the sends
// already in a window refuses until enough of them have left it.
func (l *GlobalRateLimiter) SetLimits(global, inboxDefault Limits) {
	mustNotBeNegative(global)
	mustNotBeNegative(inboxDefault)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.setLimits(global)
	l.inboxDefault = inboxDefault
}

// Limits returns the global limits and the inbox defaults.
func (l *GlobalRateLimiter) Limits() (global, inboxDefault Limits) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.global.limits(), l.inboxDefault
}

// Reserve admits one unit from inbox: ReserveN with n = 1.
func (l *GlobalRateLimiter) Reserve(now, lease time.Duration, inbox string, o Override) (Reservation, error) {
	return l.ReserveN(now, lease, inbox, o, 1)
}

// ReserveN admits a send of n units (a message, or its recipients; below 1
// counts as 1) from inbox (with its override o; "" for a send with no
// inbox) at now if the global windows and the inbox's windows all have
// room for all n, counting committed sends and reservations in flight.
// lease is the longest the send may take: it will be committed or released
// by now+lease at the latest, and Retry-After assumes it commits then. On
// refusal it returns a *RateLimitedError naming every window without room,
// with the wait until room for all n, or a *TooLargeError if n is above a
// window's limit, and reserves nothing in any.
func (l *GlobalRateLimiter) ReserveN(now, lease time.Duration, inbox string, o Override, n int) (Reservation, error) {
	t, n := int64(now), max(n, 1)
	l.mu.Lock()
	l.sweep(t)
	in := l.inbox(inbox, o, t)
	if err := tooLarge(n, &l.global, in); err != nil {
		l.mu.Unlock()
		return Reservation{}, err
	}
	l.global.advance(t)
	lacks := [2][numSpans]bool{l.global.lacks(n)}
	if in != nil {
		in.advance(t)
		lacks[1] = in.lacks(n)
	}
	if lacks != [2][numSpans]bool{} {
		err := refusal(t, n, &l.global, in, lacks)
		l.mu.Unlock()
		return Reservation{}, err
	}
	deadline := t + int64(max(lease, 0))
	r := Reservation{l: l, n: n, global: l.global.take(deadline, t, n)}
	if in != nil {
		r.inbox, r.inboxScope = in.take(deadline, t, n), in
	}
	l.mu.Unlock()
	return r, nil
}

// inbox returns the scope of inbox, made if missing, with the limits o
// gives it now; nil for no inbox. l.mu must be held.
func (l *GlobalRateLimiter) inbox(inbox string, o Override, t int64) *scope {
	if inbox == "" {
		return nil
	}
	s := l.inboxes[inbox]
	if s == nil {
		s = &scope{}
		s.init(Limits{})
		s.last = t
		l.inboxes[inbox] = s
	}
	s.setLimits(o.Apply(l.inboxDefault))
	return s
}

// sweep drops, at most once a minute, the scopes of inboxes idle for
// longer than idleAfter. l.mu must be held.
func (l *GlobalRateLimiter) sweep(t int64) {
	if t < l.nextSweep {
		return
	}
	l.nextSweep = t + int64(time.Minute)
	for id, s := range l.inboxes {
		if s.inFlight() == 0 && t-s.last > idleAfter {
			delete(l.inboxes, id)
		}
	}
}

// Restore counts a send of n units from inbox ("" for none) that went
// out, or may have, at t, so that the windows rebuilt from the database at
// start-up keep the promise across a restart. t is on the same monotonic
// axis as now (see clock.MonoAt) and may be negative. Times already
// outside the window are ignored.
func (l *GlobalRateLimiter) Restore(t time.Duration, inbox string, n int) {
	ns, n := int64(t), max(n, 1)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.count(ns, n)
	if s := l.inbox(inbox, Override{}, ns); s != nil {
		s.count(ns, n)
	}
}

// State reports the global windows at now and, unless inbox is "", those
// of inbox with override o.
func (l *GlobalRateLimiter) State(now time.Duration, inbox string, o Override) Snapshot {
	t := int64(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	snap := Snapshot{Global: l.global.state(t, Global)}
	if inbox == "" {
		return snap
	}
	snap.HasInbox = true
	if s := l.inboxes[inbox]; s != nil {
		s.setLimits(o.Apply(l.inboxDefault))
		snap.Inbox = s.state(t, Inbox)
		return snap
	}
	var empty scope
	empty.init(o.Apply(l.inboxDefault))
	snap.Inbox = empty.state(t, Inbox)
	return snap
}

// Reservation is one admitted send, in flight until it is committed or
// released. Exactly one of Commit or Release must be called, once; doing
// neither keeps the slot taken until the process ends. The zero Reservation
// does nothing.
type Reservation struct {
	l             *GlobalRateLimiter
	n             int // units
	global, inbox flight
	inboxScope    *scope // nil without an inbox
}

// Commit records that the send went out, or may have: its units count at
// now in every window it was admitted by and are no longer in flight.
func (r Reservation) Commit(now time.Duration) {
	if r.l == nil {
		return
	}
	t := int64(now)
	r.l.mu.Lock()
	r.l.settle(r)
	r.l.global.count(t, r.n)
	if r.inboxScope != nil {
		r.inboxScope.count(t, r.n)
	}
	r.l.mu.Unlock()
}

// Release gives the slot back in every window because the send certainly
// failed; it counts nothing.
func (r Reservation) Release() {
	if r.l == nil {
		return
	}
	r.l.mu.Lock()
	r.l.settle(r)
	r.l.mu.Unlock()
}

// settle ends one reservation; l.mu must be held. Settling twice would
// silently raise the limit, so like a negative sync.WaitGroup counter it
// panics (after unlocking, so a recovered panic does not wedge every later
// send).
func (l *GlobalRateLimiter) settle(r Reservation) {
	ok := l.global.settle(r.global)
	if ok && r.inboxScope != nil {
		ok = r.inboxScope.settle(r.inbox)
	}
	if !ok {
		l.mu.Unlock()
		panic("throttle: Reservation committed or released twice")
	}
}
