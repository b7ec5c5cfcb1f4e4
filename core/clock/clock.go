// Package clock is the time every part of NornWeave reads, in the two ways
// it needs: wall time, which is stored and shown, and a monotonic reading,
// which the throttle counts in. Tests pass internal/clocktest instead.
package clock

import "time"

// A Clock tells the time in two ways. Wall time is what is stored and shown
// (sent_at, X-RateLimit-Reset); it can step backwards or forwards when the
// system clock is corrected. Mono measures the intervals the throttle
// counts in and never steps: a throttle driven by wall time forgets every
// send when the clock steps forward by a minute, and refuses to count new
// ones when it steps back.
type Clock interface {
	// Now returns the wall time.
	Now() time.Time
	// Mono returns the time elapsed since a fixed origin; it never
	// decreases, whatever the wall clock does.
	Mono() time.Duration
	// AfterFunc calls f once d has passed on Mono, and returns a Timer
	// that can cancel the call. The caller owns the timer: it stops it
	// when it stops (STYLE 19).
	AfterFunc(d time.Duration, f func()) Timer
}

// A Timer is a call scheduled by AfterFunc.
type Timer interface {
	// Stop cancels the call. It reports whether it did: false if f has
	// run, is running, or was canceled already.
	Stop() bool
}

// System is the process's clock: Now is time.Now and Mono is Go's
// monotonic reading since the clock was made.
type System struct{ origin time.Time }

// NewSystem returns a System clock whose Mono starts at 0 now.
func NewSystem() System { return System{origin: time.Now()} }

// Now implements Clock.
func (c System) Now() time.Time { return time.Now() }

// Mono implements Clock. time.Since uses the monotonic reading that
// time.Now carries, so a step of the wall clock does not show here.
func (c System) Mono() time.Duration { return time.Since(c.origin) }

// AfterFunc implements Clock with time.AfterFunc: f runs in its own
// goroutine.
func (c System) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// MonoAt maps a wall time recorded earlier (a send restored from the
// database) onto c's monotonic axis, measuring its age with the wall clock
// as it reads now. This is the only place where the two clocks meet.
func MonoAt(c Clock, wall time.Time) time.Duration {
	return c.Mono() - c.Now().Sub(wall)
}
