package shared

import (
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// A shared Throttle reads a backend's raw state back into tallies, the scopes the
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

// tally evaluates r at now under lim. A reservation's slot past its
// deadline counts as a send made at its deadline, as the next admission
// will count it; one in mine counts as mine says. mine may be nil.
func tally(r *throttledriver.RawScope, now int64, lim throttle.Limits, mine locals) *throttle.Tally {
	t := throttle.NewTally(lim, now)
	if r == nil {
		return t
	}
	for _, b := range r.Second {
		t.Add(throttle.Second, now, b.Index, b.Sends)
	}
	for _, b := range r.Minute {
		t.Add(throttle.Minute, now, b.Index, b.Sends)
	}
	for _, b := range r.Hour {
		t.Add(throttle.Hour, now, b.Index, b.Sends)
	}
	for _, b := range r.Day {
		t.Add(throttle.Day, now, b.Index, b.Sends)
	}
	for _, f := range r.Flights {
		applyFlight(t, f.Deadline, max(f.N, 1), mine[f.ID], now)
	}
	return t
}

// applyFlight applies a reservation of n slots until deadline at now: the slots
// settled in mine as they were (a commit counts when made, a release
// frees), each other one in flight, or counted at the deadline once it has
// passed.
func applyFlight(t *throttle.Tally, deadline int64, n int, mine []local, now int64) {
	for _, x := range mine[:min(len(mine), n)] {
		if x.commit {
			t.CountAt(min(x.at, now), now)
		}
	}
	for range n - min(len(mine), n) {
		if deadline <= now {
			t.CountAt(deadline, now)
		} else {
			t.Take(deadline, now)
		}
	}
}

// nearLimit reports a limited window at 80% or more: where a commit left
// gathered would make the next refusal's Retry-After assume the send may
// still go out at its deadline. in may be nil.
func nearLimit(g, in *throttle.Tally) bool { return g.Near() || in != nil && in.Near() }

// roomLeft is the least room of the limited windows of g and in (nil for
// none), or -1 if none is limited.
func roomLeft(g, in *throttle.Tally) int {
	room := g.Room()
	if in == nil {
		return room
	}
	if r := in.Room(); room < 0 || r >= 0 && r < room {
		room = r
	}
	return room
}
