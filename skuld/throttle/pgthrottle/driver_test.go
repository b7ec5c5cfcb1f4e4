package pgthrottle_test

import (
	"testing"

	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver/drivertest"
)

// TestDriver runs the driver conformance suite on the real PostgreSQL, a
// fresh database per case, migrated and never restored: its state is lost
// until a case restores it.
func TestDriver(t *testing.T) {
	t.Parallel()
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		url, db := migrated(t)
		return drivertest.Harness{
			Driver: pgthrottle.NewDriver(pool(t, url)),
			Lose: map[drivertest.Part]func(t *testing.T){
				drivertest.All: func(t *testing.T) {
					exec(t, db, `DELETE FROM pgthrottle_present; DELETE FROM pgthrottle_buckets; DELETE FROM pgthrottle_flights`)
				},
				drivertest.Buckets:      func(t *testing.T) { exec(t, db, `TRUNCATE pgthrottle_buckets`) },
				drivertest.Flights:      func(t *testing.T) { exec(t, db, `TRUNCATE pgthrottle_flights`) },
				drivertest.GlobalMinute: func(t *testing.T) { exec(t, db, `DELETE FROM pgthrottle_buckets WHERE scope = '' AND width_ms = 1000`) },
				drivertest.GlobalSecond: func(t *testing.T) { exec(t, db, `DELETE FROM pgthrottle_buckets WHERE scope = '' AND width_ms = 100`) },
				drivertest.InboxDay: func(t *testing.T) {
					exec(t, db, `DELETE FROM pgthrottle_buckets WHERE scope = 'a' AND width_ms = 900000`)
				},
				drivertest.InboxFlight: func(t *testing.T) {
					exec(t, db, `DELETE FROM pgthrottle_flights WHERE id = (SELECT max(id) FROM pgthrottle_flights WHERE scope = 'a')`)
				},
			},
		}
	})
}
