package skuld_test

import (
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/clocktest"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttletest"
)

// TestMemoryThrottleConformance runs the backend conformance suite against
// the in-memory limiter behind its Throttle adapter.
func TestMemoryThrottleConformance(t *testing.T) {
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var l *skuld.GlobalRateLimiter
		return throttletest.Backend{
			New: func(global, inbox skuld.Limits) skuld.Throttle {
				if l == nil {
					l = skuld.NewGlobalRateLimiter(global.PerMinute, global.PerHour)
					l.SetInboxDefaults(inbox.PerMinute, inbox.PerHour)
				}
				return skuld.NewMemoryThrottle(l, clock)
			},
			Advance: clock.Advance,
		}
	})
}
