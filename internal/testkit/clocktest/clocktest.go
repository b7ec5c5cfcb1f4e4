// Package clocktest is a clock for tests of the send pipeline: its wall
// time and its monotonic reading move only when the test says, and can be
// moved apart, as a corrected system clock moves them. It satisfies
// clock.Clock.
package clocktest

import (
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
)

// Clock is a manual clock. It is safe for concurrent use.
type Clock struct {
	mu     sync.Mutex
	wall   time.Time
	mono   time.Duration
	timers []*timer // scheduled by AfterFunc, not yet run or stopped
}

// New returns a Clock reading wall, and 0 on the monotonic axis.
func New(wall time.Time) *Clock { return &Clock{wall: wall} }

// Now returns the wall time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall
}

// Mono returns the monotonic reading.
func (c *Clock) Mono() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mono
}

// Advance lets d pass on both clocks. The calls AfterFunc scheduled within
// d run in the order of their times, each with the clock at its time, on
// the goroutine that calls Advance and before it returns: a test sees what
// a timer did as soon as Advance returns, without waiting. A call may
// schedule another; it runs too if its time is within d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.mono + d
	for {
		next := -1
		for i, t := range c.timers {
			if t.at <= end && (next < 0 || t.at < c.timers[next].at) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		t := c.timers[next]
		c.timers = append(c.timers[:next], c.timers[next+1:]...)
		if t.at > c.mono {
			c.wall, c.mono = c.wall.Add(t.at-c.mono), t.at
		}
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.wall, c.mono = c.wall.Add(end-c.mono), end
	c.mu.Unlock()
}

// Step sets the wall clock by d without time passing.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}

// AfterFunc schedules f for when d has passed on the monotonic clock: it
// runs within the Advance that reaches its time (d <= 0: the next Advance).
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.mono + max(d, 0), f: f}
	c.timers = append(c.timers, t)
	return t
}

// Timers is how many calls are scheduled and not yet run or stopped.
func (c *Clock) Timers() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// timer is a call AfterFunc scheduled.
type timer struct {
	c  *Clock
	at time.Duration
	f  func()
}

// Stop cancels the call if it has not run.
func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	for i, o := range t.c.timers {
		if o == t {
			t.c.timers = append(t.c.timers[:i], t.c.timers[i+1:]...)
			return true
		}
	}
	return false
}
