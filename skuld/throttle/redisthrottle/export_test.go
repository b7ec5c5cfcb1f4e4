package redisthrottle

import (
	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// NewDriver returns the driver alone, for the driver conformance suite.
func NewDriver(rdb redis.UniversalClient, prefix string) throttledriver.Driver {
	return newDriver(rdb, prefix)
}
