package shared_test

import (
	"context"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver/drivertest"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// TestMemDriver runs the driver suite on the in-memory driver: the fake
// Shared's own cases run over keeps the contract the real drivers keep.
func TestMemDriver(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := newMemDriver(clock.NewSystem())
		return drivertest.Harness{Driver: d, Lose: map[drivertest.Part]func(*testing.T){drivertest.All: d.Lose}}
	})
}

// memBackend is a shared throttle's state in a memDriver on a test's
// clock, fresh for one case.
func memBackend(t *testing.T) throttletest.Backend {
	d := newMemDriver(clocktest.New(time.Now()))
	d.present = true // as a backend some server has written to
	return throttletest.Backend{
		New: func(o throttletest.Options) throttle.Throttle {
			th := shared.New(d, shared.Options{Global: o.Global, Inbox: o.Inbox, Clock: d.clock,
				SettleDelay: o.SettleDelay, Rebuild: o.Rebuild})
			t.Cleanup(func() { _ = th.Close(context.Background()) })
			return th
		},
		Advance: d.Advance,
		Margin:  shared.DefaultLeaseMargin,
		Lose:    func() { d.Lose(t) },
		Stall:   d.Stall,
		Shared:  true,
	}
}

// TestConformance runs the Throttle conformance suite on Shared over the
// in-memory driver; pgthrottle and redisthrottle run it on theirs.
func TestConformance(t *testing.T) {
	throttletest.Run(t, memBackend)
}

// TestShared runs Shared's own cases, about what it does the same over
// every driver (gathering, spares), once, over the in-memory driver.
func TestShared(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, b throttletest.Backend)
	}{
		{"CommitsGatheredFarFromLimits", testGathered},
		{"CommitsAtOnceNearLimits", testNearLimit},
		{"Spares", testSpares},
		{"SparesKeepThePromise", testSparesKeepThePromise},
		{"SparesOfADeadServer", testSparesOfADeadServer},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, memBackend(t)) })
	}
}
