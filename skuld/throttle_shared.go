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
