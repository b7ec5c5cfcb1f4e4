package skuld

import (
	"time"
)

// The shared backends keep only raw state — counted sends per bucket and
// the deadlines of reservations in flight — on the backend's own clock, in
// nanoseconds since the Unix epoch. Every server reads that state back into
// the same windows the in-memory limiter uses, so the bucket rules,
// Retry-After and the headers are computed by one piece of code for every
// backend.
//
// One clock for everyone: each server's monotonic clock is its own, so the
// shared state is stamped by the backend (PostgreSQL clock_timestamp(),
// Redis TIME). A step of the backend's clock forward ages every send by the
// step (the windows empty early, by at most the step); a step back makes
// recent sends look like the future, which count as now (see addBucket) and
// so leave late, never early.

// DefaultLeaseMargin is added to a send's lease before a shared backend
// reclaims its reservation: the server measured the lease on its own clock,
// the backend on its own, and the two may drift apart a little.
const DefaultLeaseMargin = 5 * time.Second

// Bucket widths of the two windows, in seconds, as the backends store them.
const (
	minuteBucket = 1
	hourBucket   = 60
)

// scopeState is one scope's raw shared state: the global windows or one
// inbox's.
type scopeState struct {
	minute, hour map[int64]int // bucket index → sends counted in it
	deadlines    []int64       // reservations in flight, ns
}

func newScopeState() *scopeState {
	return &scopeState{minute: map[int64]int{}, hour: map[int64]int{}}
}

// windows evaluates the scope at now under lim.
func (s *scopeState) windows(now int64, lim Limits) *windows {
	w := &windows{}
	w.init(lim)
	w.advance(now)
	for b, n := range s.minute {
		w.minute.addBucket(now, b, n)
	}
	for b, n := range s.hour {
		w.hour.addBucket(now, b, n)
	}
	for _, d := range s.deadlines {
		w.take(max(d, now), now)
	}
	return w
}

// judge decides one admission over the scopes' windows at now (inbox may be
// nil): nil if every window has room, else the refusal.
func judge(now int64, global, inbox *windows) *RateLimitedError {
	sets := [2]*windows{global, inbox}
	var full [2][2]bool
	refused := false
	for i, w := range sets {
		if w == nil {
			continue
		}
		full[i] = [2]bool{w.minute.full(), w.hour.full()}
		refused = refused || full[i][0] || full[i][1]
	}
	if !refused {
		return nil
	}
	return refusal(now, sets, full)
}

// sharedLimits holds the limits a shared backend judges by.
type sharedLimits struct {
	global, inbox Limits
}

func newSharedLimits(global, inbox Limits) sharedLimits {
	mustNotBeNegative(global)
	mustNotBeNegative(inbox)
	return sharedLimits{global: global, inbox: inbox}
}

// windowSummary is what an admission reports of one window: the sends
// committed in it and the oldest bucket holding one (hasOldest false if
// none).
type windowSummary struct {
	used      int
	oldest    int64
	hasOldest bool
}

// scopeSummary is one scope's windows at an admission, with the
// reservations in flight in it, the admitted one included.
type scopeSummary struct {
	minute, hour windowSummary
	inFlight     int
}

// admission is what a shared backend saw when it admitted a send, on its
// own clock (ns): enough for the send's rate-limit headers without reading
// the state again.
type admission struct {
	now           int64
	global, inbox scopeSummary
	limits        [2]Limits // global, inbox
	inboxScope    bool
}

// nearLimit reports a limited window at 80% or more, this send included:
// where a commit left pending would make the next refusal's Retry-After
// assume the send may still go out at its deadline.
func (a *admission) nearLimit() bool {
	for i, s := range [2]scopeSummary{a.global, a.inbox} {
		if i == 1 && !a.inboxScope {
			break
		}
		for _, w := range [2]struct{ used, limit int }{{s.minute.used, a.limits[i].PerMinute}, {s.hour.used, a.limits[i].PerHour}} {
			if w.limit > 0 && 5*(w.used+s.inFlight) >= 4*w.limit {
				return true
			}
		}
	}
	return false
}

// minuteCount and hourCount are the global counts, this send included.
func (a *admission) minuteCount() int { return a.global.minute.used + a.global.inFlight }
func (a *admission) hourCount() int   { return a.global.hour.used + a.global.inFlight }

// states reports the windows as the admission saw them, with the admitted
// send counted at the admission (counted) or given back. They are the
// state of a moment ago, not of now: a window's reset is counted from the
// admission, so it errs late, the safe side for a client. ok is false
// when a limited window is left full: its reset is a Retry-After, which
// needs every bucket and reservation, and the caller must read the state.
func (a *admission) states(counted bool) (global, inbox State, ok bool) {
	global, ok = a.global.state(a.now, a.limits[0], counted)
	if !ok || !a.inboxScope {
		return global, State{}, ok
	}
	inbox, ok = a.inbox.state(a.now, a.limits[1], counted)
	return global, inbox, ok
}

func (s scopeSummary) state(now int64, lim Limits, counted bool) (State, bool) {
	m, okm := s.minute.state(now, lim.PerMinute, time.Second, time.Minute, s.inFlight, counted)
	h, okh := s.hour.state(now, lim.PerHour, time.Minute, time.Hour, s.inFlight, counted)
	return State{PerMinute: m, PerHour: h}, okm && okh
}

// state is window.state for a window left with room, from a summary; the
// reset is then until the oldest counted send leaves.
func (s windowSummary) state(now int64, limit int, width, span time.Duration, inFlight int, counted bool) (WindowState, bool) {
	w := window{}
	w.init(limit, width, span)
	st := WindowState{Limit: limit, Used: s.used, InFlight: inFlight - 1}
	oldest, has := s.oldest, s.hasOldest
	if counted {
		st.Used++
		if b := floorDiv(now, w.width); !has || b < oldest {
			oldest, has = b, true
		}
	}
	if limit > 0 {
		st.Remaining = max(0, limit-st.Used-st.InFlight)
		if st.Remaining == 0 {
			return st, false
		}
	}
	if st.Used > 0 && has {
		st.ResetSeconds = ceilSeconds(w.expiry(oldest) - now)
	}
	return st, true
}
