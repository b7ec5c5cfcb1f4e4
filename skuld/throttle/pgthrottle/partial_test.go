package pgthrottle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
)

// TestPartialLossIsRebuilt: rows deleted or a table truncated by hand used
// to read as "no sends", and the limit was exceeded (issue 27). Each,
// between sends: the next admission finds the state incomplete, rebuilds
// it from the send record once, logs it at WARN naming the table, and
// refuses the send that would exceed the limit.
func TestPartialLossIsRebuilt(t *testing.T) {
	t.Parallel()
	minute := throttle.Limits{PerMinute: 5}
	cases := []struct {
		name, sql, table string
	}{
		{"buckets truncated", `TRUNCATE pgthrottle_buckets`, "pgthrottle_buckets"},
		{"flights truncated", `TRUNCATE pgthrottle_flights`, "pgthrottle_flights"},
		{"global minute buckets deleted", `DELETE FROM pgthrottle_buckets WHERE scope = '' AND width = 1`, "pgthrottle_buckets"},
		{"a flight deleted", `DELETE FROM pgthrottle_flights WHERE id = (SELECT max(id) FROM pgthrottle_flights)`, "pgthrottle_flights"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			url, db := migrated(t)
			var (
				mu       sync.Mutex
				rec      throttle.Record
				rebuilds int
				logs     bytes.Buffer
			)
			th := pgthrottle.New(pool(t, url), throttle.SharedOptions{Global: minute, SettleDelay: -1, MaxBatch: 1,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Rebuild: func(context.Context) (throttle.Record, error) {
					mu.Lock()
					defer mu.Unlock()
					rebuilds++
					return rec, nil
				}})
			t.Cleanup(func() { _ = th.Close(context.Background()) })
			ctx := context.Background()
			req := throttle.Request{Inbox: "a", Lease: time.Minute}
			for range 4 {
				tk, err := th.Reserve(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tk.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				rec.Sent = append(rec.Sent, throttle.Sent{Inbox: "a", At: time.Now()})
				mu.Unlock()
			}
			inFlight, err := th.Reserve(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			defer inFlight.Release(ctx)
			mu.Lock()
			rec.Pending = append(rec.Pending, throttle.Pending{Inbox: "a", Deadline: time.Now().Add(time.Minute)})
			rebuilds = 0 // the first admission initialized the state
			mu.Unlock()
			exec(t, db, c.sql)
			tk, err := th.Reserve(ctx, req)
			var rl *throttle.RateLimitedError
			if !errors.As(err, &rl) {
				if tk != nil {
					_, _ = tk.Release(ctx)
				}
				t.Fatalf("after %s: Reserve = %v, want refused (4 sent and 1 in flight, limit 5)", c.sql, err)
			}
			if rebuilds != 1 {
				t.Errorf("rebuilt %d times, want once", rebuilds)
			}
			if out := logs.String(); !strings.Contains(out, "level=WARN") ||
				!strings.Contains(out, "throttle state incomplete") || !strings.Contains(out, c.table) {
				t.Errorf("no WARN naming %s:\n%s", c.table, out)
			}
		})
	}
}
