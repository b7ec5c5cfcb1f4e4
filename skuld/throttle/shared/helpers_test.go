package shared_test

import (
	"context"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// The conformance suite's helpers, under the names its cases use.

var ctx = context.Background()

const lease = throttletest.Lease

var (
	iMinute       = throttle.InboxMinute
	reserve       = throttletest.Reserve
	refused       = throttletest.Refused
	commit        = throttletest.Commit
	state         = throttletest.State
	stop          = throttletest.Stop
	hammerThrough = throttletest.HammerThrough
)
