package notify

import (
	"math/rand/v2"
	"time"
)

// Schedule is the wait before each attempt of an event, the first at
// once: len(Schedule) attempts in all. A Snooze does not use one up.
type Schedule []time.Duration

// DefaultSchedule is Svix's and Resend's: at once, then 5 s, 5 min,
// 30 min, 2 h, 5 h, 10 h and 10 h: eight attempts over about a day and a
// quarter.
var DefaultSchedule = Schedule{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute,
	2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}

// jitter is the share of a wait that is random, so that the events of an
// endpoint that failed together do not all come back at once.
const jitter = 0.1

// Next is the wait before attempt n+1 after attempt n (from 1) failed,
// with up to 10 % of it random either way, and false when n was the last
// attempt. r is the randomness (nil: math/rand/v2's); a caller that must
// compute the same wait twice seeds one the same way.
func (s Schedule) Next(n int, r *rand.Rand) (time.Duration, bool) {
	if n < 1 || n >= len(s) {
		return 0, false
	}
	d := s[n]
	f := rand.Float64
	if r != nil {
		f = r.Float64
	}
	return d + time.Duration((f()*2-1)*jitter*float64(d)), true
}
