package skuld

import (
	"fmt"
	"slices"
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
// Releases it (the send certainly failed and counts nothing).
//
// Each window is a ring of fixed-width buckets (1 s for the minute, 1 min for
// the hour); a bucket counts until all of it is older than the window, so the
// limiter errs on the side of refusing for at most one bucket width.
//
// Time is monotonic: every method takes now as a reading of a Clock's Mono,
// never wall time, so a step of the system clock cannot empty or freeze the
// windows. Readings are expected to be non-decreasing.
//
// A GlobalRateLimiter is safe for concurrent use by multiple goroutines.
type GlobalRateLimiter struct {
	mu      sync.Mutex
	minute  window
	hour    window
	flights flights
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
// committed sends and reservations in flight. lease is the longest the send
// may take: it will be committed or released by now+lease at the latest,
// and Retry-After assumes it commits then. On refusal Reserve returns a
// *RateLimitedError and reserves nothing.
func (l *GlobalRateLimiter) Reserve(now, lease time.Duration) (Reservation, error) {
	t := int64(now)
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
	slot, gen := l.flights.add(t + int64(max(lease, 0)))
	r := Reservation{l: l, slot: slot, gen: gen, minute: l.minute.counted(), hour: l.hour.counted()}
	l.mu.Unlock()
	return r, nil
}

// refusal builds the error for the full windows; l.mu must be held.
func (l *GlobalRateLimiter) refusal(t int64, minuteFull, hourFull bool) *RateLimitedError {
	e := &RateLimitedError{Violations: make([]Violation, 0, 2)}
	late := l.flights.commitTimes(t)
	for _, w := range []struct {
		name string
		w    *window
		full bool
	}{{"per-minute", &l.minute, minuteFull}, {"per-hour", &l.hour, hourFull}} {
		if !w.full {
			continue
		}
		wait := time.Duration(ceilSeconds(w.w.retryAfter(t, late))) * time.Second
		e.Violations = append(e.Violations, Violation{Window: w.name, Count: w.w.counted(),
			Limit: w.w.limit, RetryAfter: wait})
		e.RetryAfter = max(e.RetryAfter, wait)
	}
	return e
}

// Restore counts a send that went out (or may have gone out) at t, so that
// the windows rebuilt from the database at start-up keep the promise across
// a restart. t is on the same monotonic axis as now (see MonoAt) and may be
// negative. Times already outside the window are ignored.
func (l *GlobalRateLimiter) Restore(t time.Duration) {
	ns := int64(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.minute.advance(ns)
	l.hour.advance(ns)
	l.minute.add(ns)
	l.hour.add(ns)
}

// State reports both windows at now.
func (l *GlobalRateLimiter) State(now time.Duration) State {
	t := int64(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.minute.advance(t)
	l.hour.advance(t)
	late := l.flights.commitTimes(t)
	return State{PerMinute: l.minute.state(t, late), PerHour: l.hour.state(t, late)}
}

// Reservation is one admitted send, in flight until it is committed or
// released. Exactly one of Commit or Release must be called, once; doing
// neither keeps the slot taken until the process ends. The zero Reservation
// does nothing.
type Reservation struct {
	l            *GlobalRateLimiter
	slot, gen    uint32
	minute, hour int
}

// Commit records that the send went out, or may have: it counts at now and
// is no longer in flight.
func (r Reservation) Commit(now time.Duration) {
	if r.l == nil {
		return
	}
	t := int64(now)
	l := r.l
	l.mu.Lock()
	l.settle(r)
	l.minute.advance(t)
	l.hour.advance(t)
	l.minute.add(t)
	l.hour.add(t)
	l.mu.Unlock()
}

// Release gives the slot back because the send certainly failed; it counts
// nothing.
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
	if !l.flights.remove(r.slot, r.gen) {
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

// flights holds the latest commit time of every reservation in flight, in
// reusable slots, so that Retry-After can assume the worst of each without
// allocating on the send path.
type flights struct {
	deadline []int64
	gen      []uint32 // odd while the slot is in use
	free     []uint32
	scratch  []int64
}

func (f *flights) add(deadline int64) (slot, gen uint32) {
	if n := len(f.free); n > 0 {
		slot, f.free = f.free[n-1], f.free[:n-1]
	} else {
		slot = uint32(len(f.deadline))
		f.deadline = append(f.deadline, 0)
		f.gen = append(f.gen, 0)
	}
	f.deadline[slot] = deadline
	f.gen[slot]++
	return slot, f.gen[slot]
}

// remove frees slot if gen is its current, in-use generation.
func (f *flights) remove(slot, gen uint32) bool {
	if int(slot) >= len(f.gen) || f.gen[slot] != gen || gen%2 == 0 {
		return false
	}
	f.gen[slot]++
	f.free = append(f.free, slot)
	return true
}

// commitTimes returns, in ascending order, the moment each reservation in
// flight commits at the latest: its deadline, or now for one already late.
// The slice is reused by the next call.
func (f *flights) commitTimes(now int64) []int64 {
	f.scratch = f.scratch[:0]
	for i, d := range f.deadline {
		if f.gen[i]%2 == 1 {
			f.scratch = append(f.scratch, max(d, now))
		}
	}
	slices.Sort(f.scratch)
	return f.scratch
}

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
	// oldest counted send leaves, or 0 if none is counted. Sends in flight
	// are assumed to commit at the latest moment they can.
	ResetSeconds int
}

// RateLimitedError is the refusal returned by Reserve.
type RateLimitedError struct {
	// RetryAfter is when room is next expected in every full window, in
	// whole seconds rounded up, at least 1 s: the latest of the
	// Violations' own. Sends in flight are assumed to commit at the
	// latest moment they can, so a client that waits this long and meets
	// no competitor is admitted.
	RetryAfter time.Duration
	// Violations lists the full windows, per-minute before per-hour.
	Violations []Violation
}

// Violation is one full window at the moment of a refusal.
type Violation struct {
	Window     string // "per-minute" or "per-hour"
	Count      int    // committed and in flight
	Limit      int
	RetryAfter time.Duration // when this window has room again
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
		if v.Count > v.Limit {
			// Only after a restart with a lower limit: "(5/2)" would read
			// as a broken throttle.
			fmt.Fprintf(&b, "%s limit reached (%d/%d; %d sends from before the limit was lowered still count)",
				v.Window, v.Limit, v.Limit, v.Count)
			continue
		}
		fmt.Fprintf(&b, "%s limit reached (%d/%d)", v.Window, v.Count, v.Limit)
	}
	return b.String()
}

// RetryAfterSeconds returns RetryAfter in whole seconds, for the Retry-After header.
func (e *RateLimitedError) RetryAfterSeconds() int {
	return int(e.RetryAfter / time.Second)
}

// Binding returns the violation that frees last, the one every rate-limit
// header of the refusal describes, so that they all agree with Retry-After.
func (e *RateLimitedError) Binding() Violation {
	b := e.Violations[0]
	for _, v := range e.Violations[1:] {
		if v.RetryAfter > b.RetryAfter {
			b = v
		}
	}
	return b
}

// Windows returns the names of the full windows, e.g. ["per-minute"].
func (e *RateLimitedError) Windows() []string {
	names := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		names[i] = v.Window
	}
	return names
}
