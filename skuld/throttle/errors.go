package throttle

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// RateLimitedError is a refused admission. Every number in it comes from
// the one snapshot that refused: the limiter's state under its lock, or
// the state a shared backend read in the statement that judged.
type RateLimitedError struct {
	// RetryAfter is when room is next expected in every full window, in
	// whole seconds rounded up, at least 1 s: the latest of the
	// Violations' own. Sends in flight are assumed to commit at the
	// latest moment they can, so a client that waits this long and meets
	// no competitor is admitted.
	RetryAfter time.Duration
	// RoomAfter is the earliest room may appear in every full window,
	// exact to the nanosecond: when enough committed sends have left them
	// if each send in flight were given back at once. 0 when giving back
	// the sends in flight would be enough: room may then appear at any
	// moment, when one of them fails, and only asking again tells. Mail
	// the server holds waits this long, not RetryAfter, which assumes the
	// worst of every send in flight.
	RoomAfter time.Duration
	// Violations lists the windows without room for the send, in the
	// order of Windows.
	Violations []Violation
	// Cost is the units the send asked for: 1 for a message, or its
	// recipients.
	Cost int
	// Snapshot is the windows the refusal was judged on, for the
	// rate-limit headers of the answer: every window that applies, not
	// only the full ones.
	Snapshot Snapshot
}

// Violation is one window without room for the send at the moment of a
// refusal.
type Violation struct {
	Window     Window
	Count      int // committed and in flight
	Limit      int
	RetryAfter time.Duration // when this window has room for the whole send
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
			// Only after the limit was lowered: "(5/2)" would read as a
			// broken throttle.
			fmt.Fprintf(&b, "%s limit reached (%d/%d; %d sends from before the limit was lowered still count)",
				v.Window, v.Limit, v.Limit, v.Count)
			continue
		}
		if e.Cost > 1 {
			fmt.Fprintf(&b, "%s limit reached (%d/%d; this send needs %d)", v.Window, v.Count, v.Limit, e.Cost)
			continue
		}
		fmt.Fprintf(&b, "%s limit reached (%d/%d)", v.Window, v.Count, v.Limit)
	}
	return b.String()
}

// TooLargeError is a send whose cost is above a window's limit: no wait
// would admit it, so it is refused for good rather than told to retry.
type TooLargeError struct {
	Window Window
	Limit  int
	Cost   int // the send's units
}

// Error names the window, its limit and the cost, e.g. "a send to 11
// recipients is more than the per-minute limit of 10".
func (e *TooLargeError) Error() string {
	return fmt.Sprintf("a send to %d recipients is more than the %s limit of %d", e.Cost, e.Window, e.Limit)
}

// RetryAfterSeconds returns RetryAfter in whole seconds, for the
// Retry-After header.
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

// Windows returns the full windows.
func (e *RateLimitedError) Windows() []Window {
	out := make([]Window, len(e.Violations))
	for i, v := range e.Violations {
		out[i] = v.Window
	}
	return out
}

// UnavailableError is a shared throttle backend that could not be asked.
// Nothing was reserved (a reservation made for a caller that then failed
// is given back).
type UnavailableError struct {
	Backend string // "postgres" or "redis"
	Err     error
}

// Error names the backend and the cause.
func (e *UnavailableError) Error() string {
	return fmt.Sprintf("throttle: backend %s unavailable: %v", e.Backend, e.Err)
}

// Unwrap returns the cause.
func (e *UnavailableError) Unwrap() error { return e.Err }

// ErrDisagree is a shared backend whose admission and the windows read
// from the same snapshot disagree: a bug in one of them, which is answered
// as an internal error and never as a made-up refusal.
var ErrDisagree = errors.New("throttle: backend and window rule disagree on one snapshot")
