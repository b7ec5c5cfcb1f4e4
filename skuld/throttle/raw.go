package throttle

// Shared reads a backend's raw state back into the same scopes the
// in-memory limiter keeps, so the bucket rule, Retry-After and the headers
// are computed by one piece of code for every backend.

// local is a commit or release this server has made and not yet sent: its
// own reads apply it, as the backend will when it arrives. at is when it
// was made, on the backend's clock.
type local struct {
	commit bool
	at     int64
}

// scope evaluates r at now under lim. A reservation past its deadline
// counts as a send made at its deadline, as the next admission will count
// it; one in mine counts as mine says. mine may be nil.
func (r *RawScope) scope(now int64, lim Limits, mine map[int64]local) *scope {
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
		at, counted := f.Deadline, f.Deadline <= now
		if x, ok := mine[f.ID]; ok {
			at, counted = min(x.at, now), x.commit
			if !counted {
				continue
			}
		}
		if counted {
			s.minute.add(now, floorDiv(at, s.minute.width), 1)
			s.hour.add(now, floorDiv(at, s.hour.width), 1)
			continue
		}
		s.take(f.Deadline, now)
	}
	return s
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
