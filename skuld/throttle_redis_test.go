package skuld_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttletest"
)

// TestRedisThrottleConformance runs the backend conformance suite on the
// real Redis, under a key prefix of each case's own. Two throttles of one
// case have separate clients, like two servers.
func TestRedisThrottleConformance(t *testing.T) {
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		prefix := redistest.Prefix(t)
		var offset atomic.Int64
		return throttletest.Backend{
			New: func(global, inbox skuld.Limits) skuld.Throttle {
				return skuld.NewRedisThrottle(redistest.Client(t), skuld.RedisOptions{Global: global, Inbox: inbox,
					KeyPrefix: prefix, ClockOffset: func() time.Duration { return time.Duration(offset.Load()) }})
			},
			Advance: func(d time.Duration) { offset.Add(int64(d)) },
			Margin:  skuld.DefaultLeaseMargin,
			Shared:  true,
		}
	})
}
