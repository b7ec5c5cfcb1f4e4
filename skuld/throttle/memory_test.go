package throttle_test

import (
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// TestMemoryConformance runs the backend conformance suite against the
// in-memory limiter behind its Throttle adapter.
func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		var l *throttle.GlobalRateLimiter
		return throttletest.Backend{
			New: func(o throttletest.Options) throttle.Throttle {
				if l == nil {
					l = throttle.NewGlobalRateLimiter(o.Global, o.Inbox)
				}
				return throttle.NewMemory(l, clock)
			},
			Advance: clock.Advance,
			Weights: true,
			Spans:   true,
		}
	})
}

func BenchmarkReserveCommitMemory(b *testing.B) {
	l := throttle.NewGlobalRateLimiter(throttletest.BenchLimits, throttletest.BenchLimits)
	throttletest.BenchReserveCommit(b, throttle.NewMemory(l, clock.NewSystem()))
}
