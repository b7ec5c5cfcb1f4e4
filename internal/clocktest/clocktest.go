// Package clocktest is a clock for tests of the send pipeline: its wall
// time and its monotonic reading move only when the test says, and can be
// moved apart, as a corrected system clock moves them. It satisfies
// clock.Clock.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a manual clock. It is safe for concurrent use.
type Clock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
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

// Advance lets d pass on both clocks.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall, c.mono = c.wall.Add(d), c.mono+d
}

// Step sets the wall clock by d without time passing.
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
}
