package throttle

// A Tally is one scope's windows (the global ones, or one inbox's)
// rebuilt from a shared backend's raw state: the buckets it counted and
// the reservations it holds. A shared throttle reads the backend back into
// tallies so that the window rule, Retry-After, RoomAfter and the headers
// come from the limiter's own code for every backend. Times are ns on the
// backend's clock, and now must not move backwards between calls. A Tally
// is not safe for concurrent use.
type Tally struct{ s scope }

// NewTally returns an empty tally with limits lim, read at now.
func NewTally(lim Limits, now int64) *Tally {
	t := &Tally{}
	t.s.init(lim)
	t.s.advance(now)
	return t
}

// SetLimits changes the limits; what is counted stays counted.
func (t *Tally) SetLimits(lim Limits) { t.s.setLimits(lim) }

// Add counts n sends in bucket b of the window of span sp (100 ms buckets
// for Second, 1 s for Minute, 1 min for Hour, 15 min for Day), read at now. A bucket already wholly
// outside the window counts nothing; one after now's counts as now's.
func (t *Tally) Add(sp Span, now, b int64, n int) { t.s.rings[sp].add(now, b, n) }

// CountAt counts one send made at at, read at now, in every window.
func (t *Tally) CountAt(at, now int64) { t.s.countAt(at, now, 1) }

// Take puts one slot in flight until deadline, taken at now: it counts in
// every window, and a refusal's Retry-After assumes it commits at deadline.
func (t *Tally) Take(deadline, now int64) { t.s.take(deadline, now, 1) }

// Lacks reports whether a limited window has no room for n more sends.
func (t *Tally) Lacks(n int) bool { return t.s.lacks(n) != [numSpans]bool{} }

// Near reports a limited window at 80% or more of its limit.
func (t *Tally) Near() bool {
	for sp := range t.s.rings {
		if r := &t.s.rings[sp]; r.limit > 0 && 5*r.counted() >= 4*r.limit {
			return true
		}
	}
	return false
}

// Room is the least room of the limited windows, never below 0, or -1 if
// neither is limited.
func (t *Tally) Room() int {
	room := -1
	for sp := range t.s.rings {
		if r := &t.s.rings[sp]; r.limit > 0 && (room < 0 || r.limit-r.counted() < room) {
			room = max(r.limit-r.counted(), 0)
		}
	}
	return room
}

// State reports the windows at now, as windows of scope sc.
func (t *Tally) State(now int64, sc Scope) ScopeState { return t.s.state(now, sc) }

// Refusal is the error of an admission of n units refused at now by the
// windows of global and of inbox (nil for none) without room for them,
// with every number taken from them, as the limiter's own refusal is
// built.
func Refusal(now int64, n int, global, inbox *Tally) *RateLimitedError {
	n = max(n, 1)
	lacks := [2][numSpans]bool{global.s.lacks(n)}
	var in *scope
	if inbox != nil {
		in = &inbox.s
		lacks[1] = in.lacks(n)
	}
	return refusal(now, n, &global.s, in, lacks)
}

// TooLargeFor is the error of a send of n units above a limited window of
// global or of inbox (nil for a send with no inbox), which no wait would
// admit; nil if every window could hold it. It reads the limits alone.
func TooLargeFor(n int, global Limits, inbox *Limits) *TooLargeError {
	var g, in scope // limits alone: tooLarge reads nothing else
	g.setLimits(global)
	var ip *scope
	if inbox != nil {
		in.setLimits(*inbox)
		ip = &in
	}
	return tooLarge(n, &g, ip)
}
