package throttle

import (
	"slices"
	"time"
)

// scope is one scope's windows — the global ones, or one inbox's — and the
// reservations in flight in them.
type scope struct {
	rings   [numSpans]ring
	flights flights
	last    int64 // the latest activity, for dropping idle inboxes
}

// flight names a reservation's slot in a scope's flights.
type flight struct{ slot, gen uint32 }

func (s *scope) init(lim Limits) {
	for sp := range s.rings {
		s.rings[sp].init(lim.of(Span(sp)), Span(sp))
	}
}

func (s *scope) setLimits(lim Limits) {
	for sp := range s.rings {
		s.rings[sp].limit = lim.of(Span(sp))
	}
}

func (s *scope) limits() Limits {
	return Limits{PerSecond: s.rings[Second].limit, PerMinute: s.rings[Minute].limit,
		PerHour: s.rings[Hour].limit, PerDay: s.rings[Day].limit}
}

func (s *scope) advance(t int64) {
	for sp := range s.rings {
		s.rings[sp].advance(t)
	}
}

// lacks reports which of the scope's windows have no room for n more
// units; advance must have run.
func (s *scope) lacks(n int) (out [numSpans]bool) {
	for sp := range s.rings {
		out[sp] = s.rings[sp].lacks(n)
	}
	return out
}

// inFlight is the units the scope's reservations hold.
func (s *scope) inFlight() int { return s.rings[Minute].inFlight }

// take puts one reservation of n units in flight until deadline.
func (s *scope) take(deadline, t int64, n int) flight {
	for sp := range s.rings {
		s.rings[sp].inFlight += n
	}
	s.last = max(s.last, t)
	slot, gen := s.flights.add(deadline, n)
	return flight{slot, gen}
}

// settle ends the reservation f; false if it was not in flight.
func (s *scope) settle(f flight) bool {
	n, ok := s.flights.remove(f.slot, f.gen)
	if !ok {
		return false
	}
	for sp := range s.rings {
		s.rings[sp].inFlight -= n
	}
	return true
}

// count adds n units counted at t.
func (s *scope) count(t int64, n int) {
	s.advance(t)
	s.countAt(t, t, n)
	s.last = max(s.last, t)
}

// countAt counts n units spent at at, read at now.
func (s *scope) countAt(at, now int64, n int) {
	for sp := range s.rings {
		r := &s.rings[sp]
		r.add(now, floorDiv(at, r.width), n)
	}
}

func (s *scope) state(t int64, sc Scope) ScopeState {
	s.advance(t)
	// The moments the sends in flight commit at the latest matter only to
	// a full window's Retry-After; sorting them is the costly part.
	var late []lateSend
	for sp := range s.rings {
		if s.rings[sp].full() {
			late = s.flights.commitTimes(t)
			break
		}
	}
	var st [numSpans]WindowState
	for sp := range s.rings {
		st[sp] = s.rings[sp].state(t, late, Window{sc, Span(sp)})
	}
	return ScopeState{PerSecond: st[Second], PerMinute: st[Minute], PerHour: st[Hour], PerDay: st[Day]}
}

// refusal builds the error for the windows of the global scope and an
// inbox's (nil for none) without room for n at t; lacks is what their
// lacks(n) said.
func refusal(t int64, n int, global, inbox *scope, lacks [2][numSpans]bool) *RateLimitedError {
	e := &RateLimitedError{Violations: make([]Violation, 0, 2), Cost: n}
	for i, s := range [2]*scope{global, inbox} {
		if s == nil {
			continue
		}
		late := s.flights.commitTimes(t)
		for sp := range s.rings {
			if !lacks[i][sp] {
				continue
			}
			r := &s.rings[sp]
			wait := time.Duration(ceilSeconds(r.retryAfter(t, n, late))) * time.Second
			e.Violations = append(e.Violations, Violation{Window: Window{Scope(i), Span(sp)},
				Count: r.counted(), Limit: r.limit, RetryAfter: wait})
			e.RetryAfter = max(e.RetryAfter, wait)
			e.RoomAfter = max(e.RoomAfter, time.Duration(r.roomAfter(t, n)))
		}
	}
	e.Snapshot.Global = global.state(t, Global)
	if inbox != nil {
		e.Snapshot.Inbox, e.Snapshot.HasInbox = inbox.state(t, Inbox), true
	}
	return e
}

// tooLarge returns the error for a cost of n above a limited window of
// global or inbox (nil for none), which no wait would admit; nil if every
// window could hold it.
func tooLarge(n int, global, inbox *scope) *TooLargeError {
	if n <= 1 {
		return nil
	}
	for i, s := range [2]*scope{global, inbox} {
		if s == nil {
			continue
		}
		for sp := range s.rings {
			if r := &s.rings[sp]; r.limit > 0 && n > r.limit {
				return &TooLargeError{Window: Window{Scope(i), Span(sp)}, Limit: r.limit, Cost: n}
			}
		}
	}
	return nil
}

// lateSend is a reservation in flight as Retry-After sees it: it commits
// at the latest at at, n units.
type lateSend struct {
	at int64
	n  int
}

// flights holds the latest commit time and the units of every reservation
// in flight, in reusable slots, so that Retry-After can assume the worst of
// each without allocating on the send path.
type flights struct {
	deadline []int64
	n        []int
	gen      []uint32 // odd while the slot is in use
	free     []uint32
	scratch  []lateSend
}

func (f *flights) add(deadline int64, n int) (slot, gen uint32) {
	if k := len(f.free); k > 0 {
		slot, f.free = f.free[k-1], f.free[:k-1]
	} else {
		slot = uint32(len(f.deadline))
		f.deadline = append(f.deadline, 0)
		f.n = append(f.n, 0)
		f.gen = append(f.gen, 0)
	}
	f.deadline[slot], f.n[slot] = deadline, n
	f.gen[slot]++
	return slot, f.gen[slot]
}

// remove frees slot if gen is its current, in-use generation, and returns
// the units it held.
func (f *flights) remove(slot, gen uint32) (int, bool) {
	if int(slot) >= len(f.gen) || f.gen[slot] != gen || gen%2 == 0 {
		return 0, false
	}
	f.gen[slot]++
	f.free = append(f.free, slot)
	return f.n[slot], true
}

// commitTimes returns, in ascending order, the moment each reservation in
// flight commits at the latest (its deadline, or now for one already
// late), with its units. The slice is reused by the next call.
func (f *flights) commitTimes(now int64) []lateSend {
	f.scratch = f.scratch[:0]
	for i, d := range f.deadline {
		if f.gen[i]%2 == 1 {
			f.scratch = append(f.scratch, lateSend{max(d, now), f.n[i]})
		}
	}
	slices.SortFunc(f.scratch, func(a, b lateSend) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
	return f.scratch
}
