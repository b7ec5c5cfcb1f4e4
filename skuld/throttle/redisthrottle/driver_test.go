package redisthrottle_test

import (
	"context"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/redistest"
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
		tag := "{" + prefix + "}"
		del := func(keys ...string) func(t *testing.T) {
			return func(t *testing.T) {
				for _, k := range keys {
					if n, err := rdb.Del(context.Background(), tag+k).Result(); err != nil || n != 1 {
						t.Fatalf("DEL %s: %d, %v", tag+k, n, err)
					}
				}
			}
		}
		return drivertest.Harness{
			Driver: redisthrottle.NewDriver(rdb, prefix),
			Lose: map[drivertest.Part]func(t *testing.T){
				drivertest.All:          func(t *testing.T) { deleteAll(t, rdb, tag) },
				drivertest.GlobalSecond: del(":g:s"),
				drivertest.GlobalMinute: del(":g:m"),
				drivertest.GlobalHour:   del(":g:h"),
				drivertest.GlobalDay:    del(":g:d"),
				drivertest.GlobalFlight: del(":g:f"),
				drivertest.GlobalSlots:  del(":g:n"),
				drivertest.InboxMinute:  del(":i:a:m"),
				drivertest.InboxHour:    del(":i:a:h"),
				drivertest.InboxDay:     del(":i:a:d"),
				drivertest.InboxFlight:  del(":i:a:f"),
				drivertest.InboxSlots:   del(":i:a:n"),
				drivertest.InboxAll:     del(":i:a:s", ":i:a:m", ":i:a:h", ":i:a:d", ":i:a:f", ":i:a:n"),
				drivertest.IDs:          del(":seq"),
			},
		}
	})
}
