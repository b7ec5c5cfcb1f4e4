package skuld

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// A GlobalRateLimiter enforces the send throttle: in any interval of 60
// seconds at most perMinute sends succeed, and in any interval of 3600
// seconds at most perHour, however many goroutines send at once; and, for a
// send from an inbox, the same two windows of that inbox's own (the inbox
// defaults, or the inbox's override). A limit of 0 leaves that window
// unlimited.
//
// A send is admitted with Reserve before the provider is called, and needs
// room in every window that applies; it is admitted by all of them or
// refused with nothing taken from any. The Reservation counts as in flight,
// so concurrent callers cannot all pass a check that none of them has
// recorded yet. When the provider answers, the caller Commits the
// reservation (the send counts at the commit moment) or Releases it (the
// send certainly failed and counts nothing).
//
// Each window is a ring of fixed-width buckets (1 s for the minute, 1 min for
// the hour); a bucket counts until all of it is older than the window, so the
// limiter errs on the side of refusing for at most one bucket width.
//
// Time is monotonic: every method takes now as a reading of a Clock's Mono,
// never wall time, so a step of the system clock cannot empty or freeze the
// windows. Readings are expected to be non-decreasing.
//
// The windows of an inbox idle for longer than an hour (nothing counted,
// nothing in flight) are dropped, and come back empty, so memory follows
// the inboxes in use, not the inboxes that exist.
//
// A GlobalRateLimiter is safe for concurrent use by multiple goroutines.
type GlobalRateLimiter struct {
	mu     sync.Mutex
	global windows
	// inboxDefault is every inbox's limits unless it overrides them.
	inboxDefault Limits
	inboxes      map[string]*windows
	nextSweep    int64
}

// Limits are a pair of windows' limits; 0 means unlimited.
type Limits struct{ PerMinute, PerHour int }

// Override is an inbox's own limits; a nil field means the default.
type Override struct {
	PerMinute, PerHour *int
	// Version is the version of the inboxes (Throttle.InboxVersion) the
	// override was read at, for a shared backend to check; "" for a copy
	// read just now, or for the in-memory limiter, which ignores it.
	Version string
}

// idleAfter is how long an inbox's windows outlive its last send: past the
// hour window and its last bucket, they count nothing.
const idleAfter = int64(61 * time.Minute)

// NewGlobalRateLimiter returns a limiter allowing perMinute sends in any 60 s
// and perHour sends in any 3600 s; 0 means unlimited. Inboxes have no limits
// of their own until SetInboxDefaults or an Override. It panics on a
// negative limit, which configuration validation rejects first.
func NewGlobalRateLimiter(perMinute, perHour int) *GlobalRateLimiter {
	mustNotBeNegative(Limits{perMinute, perHour})
	l := &GlobalRateLimiter{inboxes: make(map[string]*windows)}
	l.global.init(Limits{perMinute, perHour})
	return l
}

func mustNotBeNegative(lim Limits) {
	if lim.PerMinute < 0 || lim.PerHour < 0 {
		panic(fmt.Sprintf("skuld: negative rate limit (per minute %d, per hour %d)", lim.PerMinute, lim.PerHour))
	}
}

// SetInboxDefaults sets the limits of every inbox without an override.
// Call it before the limiter is used.
func (l *GlobalRateLimiter) SetInboxDefaults(perMinute, perHour int) {
	mustNotBeNegative(Limits{perMinute, perHour})
	l.mu.Lock()
	defer l.mu.Unlock()
	l.inboxDefault = Limits{perMinute, perHour}
}

// Limits returns the configured global limits; 0 means unlimited.
func (l *GlobalRateLimiter) Limits() (perMinute, perHour int) {
	return l.global.minute.limit, l.global.hour.limit
}

func (lim Limits) with(o Override) Limits {
	if o.PerMinute != nil {
		lim.PerMinute = *o.PerMinute
	}
	if o.PerHour != nil {
		lim.PerHour = *o.PerHour
	}
	return lim
}

// Reserve admits one send with no inbox at now if the global windows have
// room; see ReserveInbox.
func (l *GlobalRateLimiter) Reserve(now, lease time.Duration) (Reservation, error) {
	return l.ReserveInbox(now, lease, "", Override{})
}

// ReserveInbox admits one send from inboxID (with its override o) at now if
// the global windows and the inbox's windows all have room, counting
// committed sends and reservations in flight. lease is the longest the send
// may take: it will be committed or released by now+lease at the latest,
// and Retry-After assumes it commits then. On refusal it returns a
// *RateLimitedError naming every full window, and reserves nothing in any.
// An empty inboxID reserves in the global windows only.
func (l *GlobalRateLimiter) ReserveInbox(now, lease time.Duration, inboxID string, o Override) (Reservation, error) {
	t := int64(now)
	l.mu.Lock()
	l.sweep(t)
	sets := [2]*windows{&l.global, l.inbox(inboxID, o, t)}
	var full [2][2]bool
	refused := false
	for i, w := range sets {
		if w == nil {
			continue
		}
		w.advance(t)
		full[i] = [2]bool{w.minute.full(), w.hour.full()}
		refused = refused || full[i][0] || full[i][1]
	}
	if refused {
		err := refusal(t, sets, full)
		l.mu.Unlock()
		return Reservation{}, err
	}
	deadline := t + int64(max(lease, 0))
	r := Reservation{l: l, minute: l.global.minute.counted() + 1, hour: l.global.hour.counted() + 1}
	r.global = l.global.take(deadline, t)
	if sets[1] != nil {
		r.inbox, r.inboxSet = sets[1].take(deadline, t), sets[1]
	}
	l.mu.Unlock()
	return r, nil
}

// inbox returns the windows of inboxID, made if missing, with the limits o
// gives it now; nil for no inbox. l.mu must be held.
func (l *GlobalRateLimiter) inbox(inboxID string, o Override, t int64) *windows {
	if inboxID == "" {
		return nil
	}
	w := l.inboxes[inboxID]
	if w == nil {
		w = &windows{}
		w.init(Limits{})
		w.last = t
		l.inboxes[inboxID] = w
	}
	lim := l.inboxDefault.with(o)
	w.minute.limit, w.hour.limit = lim.PerMinute, lim.PerHour
	return w
}

// sweep drops, at most once a minute, the windows of inboxes idle for
// longer than idleAfter. l.mu must be held.
func (l *GlobalRateLimiter) sweep(t int64) {
	if t < l.nextSweep {
		return
	}
	l.nextSweep = t + int64(time.Minute)
	for id, w := range l.inboxes {
		if w.minute.inFlight == 0 && t-w.last > idleAfter {
			delete(l.inboxes, id)
		}
	}
}

// refusal builds the error for the full windows; their lock, if any, must
// be held.
func refusal(t int64, sets [2]*windows, full [2][2]bool) *RateLimitedError {
	e := &RateLimitedError{Violations: make([]Violation, 0, 2)}
	for i, prefix := range [2]string{"", "inbox "} {
		w := sets[i]
		if w == nil {
			continue
		}
		late := w.flights.commitTimes(t)
		for j, win := range [2]*window{&w.minute, &w.hour} {
			if !full[i][j] {
				continue
			}
			wait := time.Duration(ceilSeconds(win.retryAfter(t, late))) * time.Second
			e.Violations = append(e.Violations, Violation{Window: prefix + [2]string{"per-minute", "per-hour"}[j],
				Count: win.counted(), Limit: win.limit, RetryAfter: wait})
			e.RetryAfter = max(e.RetryAfter, wait)
		}
	}
	return e
}

// Restore counts a send with no inbox that went out, or may have, at t;
// see RestoreInbox.
func (l *GlobalRateLimiter) Restore(t time.Duration) { l.RestoreInbox(t, "") }

// RestoreInbox counts a send from inboxID that went out (or may have) at t,
// so that the windows rebuilt from the database at start-up keep the
// promise across a restart. t is on the same monotonic axis as now (see
// MonoAt) and may be negative. Times already outside the window are ignored.
func (l *GlobalRateLimiter) RestoreInbox(t time.Duration, inboxID string) {
	ns := int64(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.global.count(ns)
	if w := l.inbox(inboxID, Override{}, ns); w != nil {
		w.count(ns)
	}
}

// State reports the global windows at now.
func (l *GlobalRateLimiter) State(now time.Duration) State {
	t := int64(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.global.state(t)
}

// InboxState reports the windows of inboxID, with override o, at now.
func (l *GlobalRateLimiter) InboxState(now time.Duration, inboxID string, o Override) State {
	t := int64(now)
	l.mu.Lock()
	defer l.mu.Unlock()
	if w := l.inboxes[inboxID]; w != nil {
		l.inbox(inboxID, o, t) // apply the limits
		return w.state(t)
	}
	var empty windows
	empty.init(l.inboxDefault.with(o))
	return empty.state(t)
}

// Reservation is one admitted send, in flight until it is committed or
// released. Exactly one of Commit or Release must be called, once; doing
// neither keeps the slot taken until the process ends. The zero Reservation
// does nothing.
type Reservation struct {
	l             *GlobalRateLimiter
	global, inbox flight
	inboxSet      *windows // nil without an inbox
	minute, hour  int
}

// Commit records that the send went out, or may have: it counts at now in
// every window it was admitted by and is no longer in flight.
func (r Reservation) Commit(now time.Duration) {
	if r.l == nil {
		return
	}
	t := int64(now)
	r.l.mu.Lock()
	r.l.settle(r)
	r.l.global.count(t)
	if r.inboxSet != nil {
		r.inboxSet.count(t)
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
	if ok && r.inboxSet != nil {
		ok = r.inboxSet.settle(r.inbox)
	}
	if !ok {
		l.mu.Unlock()
		panic("skuld: Reservation committed or released twice")
	}
}

// MinuteCount is the global per-minute count (committed and in flight) at
// admission, this send included.
func (r Reservation) MinuteCount() int { return r.minute }

// HourCount is the global per-hour count (committed and in flight) at
// admission, this send included.
func (r Reservation) HourCount() int { return r.hour }

// windows is a pair of windows — the global ones, or one inbox's — and the
// reservations in flight in them.
type windows struct {
	minute, hour window
	flights      flights
	last         int64 // the latest activity, for dropping idle inboxes
}

// flight names a reservation's slot in a windows' flights.
type flight struct{ slot, gen uint32 }

func (w *windows) init(lim Limits) {
	w.minute.init(lim.PerMinute, time.Second, time.Minute)
	w.hour.init(lim.PerHour, time.Minute, time.Hour)
}

func (w *windows) advance(t int64) {
	w.minute.advance(t)
	w.hour.advance(t)
}

// take puts one reservation in flight until deadline.
func (w *windows) take(deadline, t int64) flight {
	w.minute.inFlight++
	w.hour.inFlight++
	w.last = max(w.last, t)
	slot, gen := w.flights.add(deadline)
	return flight{slot, gen}
}

// settle ends the reservation f; false if it was not in flight.
func (w *windows) settle(f flight) bool {
	if !w.flights.remove(f.slot, f.gen) {
		return false
	}
	w.minute.inFlight--
	w.hour.inFlight--
	return true
}

// count adds one send counted at t.
func (w *windows) count(t int64) {
	w.advance(t)
	w.minute.add(t)
	w.hour.add(t)
	w.last = max(w.last, t)
}

func (w *windows) state(t int64) State {
	w.advance(t)
	late := w.flights.commitTimes(t)
	return State{PerMinute: w.minute.state(t, late), PerHour: w.hour.state(t, late)}
}

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
	// Violations lists the full windows: global before inbox, per-minute
	// before per-hour.
	Violations []Violation
}

// Violation is one full window at the moment of a refusal.
type Violation struct {
	// Window is "per-minute", "per-hour", "inbox per-minute" or
	// "inbox per-hour".
	Window     string
	Count      int // committed and in flight
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
