package skuld_test

import (
	"context"
	"errors"
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
		newThrottle := func(global, inbox skuld.Limits) skuld.Throttle {
			return skuld.NewRedisThrottle(redistest.Client(t), skuld.RedisOptions{Global: global, Inbox: inbox,
				KeyPrefix: prefix, ClockOffset: func() time.Duration { return time.Duration(offset.Load()) }})
		}
		return throttletest.Backend{
			New:     newThrottle,
			Advance: func(d time.Duration) { offset.Add(int64(d)) },
			Margin:  skuld.DefaultLeaseMargin,
			// Redis does not see the database: the server that changed
			// the inbox tells it.
			ChangeInbox: func() {
				if err := newThrottle(skuld.Limits{}, skuld.Limits{}).InboxesChanged(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			Shared: true,
		}
	})
}

// A Redis that lost its data (restarted; it keeps nothing on disk) must not
// take a copy of an inbox read before for current: the version it starts
// again from is one no server has seen.
func TestRedisThrottleVersionAfterDataLoss(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	prefix := redistest.Prefix(t)
	th := skuld.NewRedisThrottle(rdb, skuld.RedisOptions{KeyPrefix: prefix})
	v, err := th.InboxVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.Del(ctx, "{"+prefix+"}:inbox-version").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := th.ReserveInbox(ctx, time.Second, "a", skuld.Override{Version: v}); !errors.Is(err, skuld.ErrStaleInbox) {
		t.Fatalf("ReserveInbox with a copy from before the data loss: %v, want ErrStaleInbox", err)
	}
	if v2, err := th.InboxVersion(ctx); err != nil || v2 == v || v2 == "" {
		t.Fatalf("InboxVersion after the data loss = %q, %v; want a new one", v2, err)
	}
}
