package redisthrottle_test

import (
	"testing"

	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver/drivertest"
)

// TestDriver runs the driver conformance suite on the real Redis, under a
// key prefix of each case's own that has never held a state.
func TestDriver(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		prefix := redistest.Prefix(t)
		rdb := redistest.Client(t)
		return drivertest.Harness{
			Driver: redisthrottle.NewDriver(rdb, prefix),
			Lose: map[drivertest.Part]func(t *testing.T){
				drivertest.All: func(t *testing.T) { deleteAll(t, rdb, "{"+prefix+"}") },
			},
		}
	})
}
