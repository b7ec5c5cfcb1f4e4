package throttle

// Shared reads a backend's raw state back into the same scopes the
// in-memory limiter keeps, so the bucket rule, Retry-After and the headers
// are computed by one piece of code for every backend.

// local is a commit or release of one slot this server has made and not
// yet sent: its own reads apply it, as the backend will when it arrives.
// at is when it was made, on the backend's clock. A spare slot it holds
// unused reads as released.
type local struct {
	commit bool
	at     int64
}

// locals is what this server has made of reservations' slots, by id.
type locals map[int64][]local

// scope evaluates r at now under lim. A reservation's slot past its
// deadline counts as a send made at its deadline, as the next admission
// will count it; one in mine counts as mine says. mine may be nil.
func (r *RawScope) scope(now int64, lim Limits, mine locals) *scope {
	s := &scope{}
	s.init(lim)
	s.advance(now)
	if r == nil {
		return s
	}
	for _, b := range r.Minute {
		s.minute.add(now, b.Index, b.Sends)
	}
	for _, b := range r.Hour {
		s.hour.add(now, b.Index, b.Sends)
	}
	for _, f := range r.Flights {
		s.flight(f.Deadline, max(f.N, 1), mine[f.ID], now)
	}
	return s
}

// flight applies a reservation of n slots until deadline at now: the slots
// settled in mine as they were (a commit counts when made, a release
// frees), each other one in flight, or counted at the deadline once it has
// passed.
func (s *scope) flight(deadline int64, n int, mine []local, now int64) {
	for _, x := range mine[:min(len(mine), n)] {
		if x.commit {
			s.countAt(min(x.at, now), now)
		}
	}
	for range n - min(len(mine), n) {
		if deadline <= now {
			s.countAt(deadline, now)
		} else {
			s.take(deadline, now)
		}
	}
}

// countAt counts one send made at at, read at now.
func (s *scope) countAt(at, now int64) {
	s.minute.add(now, floorDiv(at, s.minute.width), 1)
	s.hour.add(now, floorDiv(at, s.hour.width), 1)
}

// nearLimit reports a limited window at 80% or more: where a commit left
// gathered would make the next refusal's Retry-After assume the send may
// still go out at its deadline.
func nearLimit(scopes ...*scope) bool {
	for _, s := range scopes {
		if s == nil {
			continue
		}
		for _, r := range [2]*ring{&s.minute, &s.hour} {
			if r.limit > 0 && 5*r.counted() >= 4*r.limit {
				return true
			}
		}
	}
	return false
}
