package throttle

import (
	"slices"
	"time"
)

// scope is one scope's two windows — the global ones, or one inbox's — and
// the reservations in flight in them.
type scope struct {
	minute, hour ring
	flights      flights
	last         int64 // the latest activity, for dropping idle inboxes
}

// flight names a reservation's slot in a scope's flights.
type flight struct{ slot, gen uint32 }

func (s *scope) init(lim Limits) {
	s.minute.init(lim.PerMinute, Minute)
	s.hour.init(lim.PerHour, Hour)
}

func (s *scope) setLimits(lim Limits) {
	s.minute.limit, s.hour.limit = lim.PerMinute, lim.PerHour
}

func (s *scope) advance(t int64) {
	s.minute.advance(t)
	s.hour.advance(t)
}

// full reports which of the scope's windows are full; advance must have run.
func (s *scope) full() [2]bool { return [2]bool{s.minute.full(), s.hour.full()} }

// lacks reports which of the scope's windows have no room for n more
// sends; advance must have run.
func (s *scope) lacks(n int) [2]bool { return [2]bool{s.minute.lacks(n), s.hour.lacks(n)} }

// take puts one reservation in flight until deadline.
func (s *scope) take(deadline, t int64) flight {
	s.minute.inFlight++
	s.hour.inFlight++
	s.last = max(s.last, t)
	slot, gen := s.flights.add(deadline)
	return flight{slot, gen}
}

// settle ends the reservation f; false if it was not in flight.
func (s *scope) settle(f flight) bool {
	if !s.flights.remove(f.slot, f.gen) {
		return false
	}
	s.minute.inFlight--
	s.hour.inFlight--
	return true
}

// count adds one send counted at t.
func (s *scope) count(t int64) {
	s.advance(t)
	s.minute.add(t, floorDiv(t, s.minute.width), 1)
	s.hour.add(t, floorDiv(t, s.hour.width), 1)
	s.last = max(s.last, t)
}

func (s *scope) state(t int64, sc Scope) Pair {
	s.advance(t)
	// The moments the sends in flight commit at the latest matter only to
	// a full window's Retry-After; sorting them is the costly part.
	var late []int64
	if s.minute.full() || s.hour.full() {
		late = s.flights.commitTimes(t)
	}
	return Pair{PerMinute: s.minute.state(t, late, Window{sc, Minute}),
		PerHour: s.hour.state(t, late, Window{sc, Hour})}
}

// refusal builds the error for the full windows of the global scope and an
// inbox's (nil for none) at t; full is what their full() said.
func refusal(t int64, global, inbox *scope, full [2][2]bool) *RateLimitedError {
	e := &RateLimitedError{Violations: make([]Violation, 0, 2)}
	for i, s := range [2]*scope{global, inbox} {
		if s == nil {
			continue
		}
		late := s.flights.commitTimes(t)
		for j, r := range [2]*ring{&s.minute, &s.hour} {
			if !full[i][j] {
				continue
			}
			wait := time.Duration(ceilSeconds(r.retryAfter(t, late))) * time.Second
			e.Violations = append(e.Violations, Violation{Window: Window{Scope(i), Span(j)},
				Count: r.counted(), Limit: r.limit, RetryAfter: wait})
			e.RetryAfter = max(e.RetryAfter, wait)
			e.RoomAfter = max(e.RoomAfter, time.Duration(r.roomAfter(t)))
		}
	}
	e.Snapshot.Global = global.state(t, Global)
	if inbox != nil {
		e.Snapshot.Inbox, e.Snapshot.HasInbox = inbox.state(t, Inbox), true
	}
	return e
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
