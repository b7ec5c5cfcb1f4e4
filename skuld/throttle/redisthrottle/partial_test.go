package redisthrottle_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
)

// TestPartialLossIsRebuilt: a key of the state deleted (or evicted) on
// its own used to read as "no sends", and the limit was exceeded (issue
// 27: 739 sends in an hour limited to 600). Each kind of key, deleted
// between sends: the next admission finds it missing, the state is rebuilt
// from the send record once, logged at WARN naming the key, and the send
// that would exceed the limit is refused.
func TestPartialLossIsRebuilt(t *testing.T) {
	t.Parallel()
	five := throttle.Limits{PerMinute: 5, PerHour: 5}
	minuteOnly, hourOnly := throttle.Limits{PerMinute: 5}, throttle.Limits{PerHour: 5}
	cases := []struct {
		name           string
		keys           []string // deleted, after the prefix's tag
		inbox          string   // the sends'
		global, limits throttle.Limits
	}{
		{"global minute hash", []string{":g:m"}, "", minuteOnly, throttle.Limits{}},
		{"global hour hash", []string{":g:h"}, "", hourOnly, throttle.Limits{}},
		{"global flights", []string{":g:f"}, "", five, throttle.Limits{}},
		{"global slots", []string{":g:n"}, "", five, throttle.Limits{}},
		{"inbox minute hash", []string{":i:a:m"}, "a", throttle.Limits{}, minuteOnly},
		{"inbox hour hash", []string{":i:a:h"}, "a", throttle.Limits{}, hourOnly},
		{"inbox flights", []string{":i:a:f"}, "a", throttle.Limits{}, five},
		{"inbox slots", []string{":i:a:n"}, "a", throttle.Limits{}, five},
		{"every key of an inbox", []string{":i:a:m", ":i:a:h", ":i:a:f", ":i:a:n"}, "a", throttle.Limits{}, five},
		{"reservation ids", []string{":seq"}, "a", five, five},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			prefix, rdb := redistest.Prefix(t), redistest.Client(t)
			tag := "{" + prefix + "}"
			var (
				mu       sync.Mutex
				rec      throttle.Record
				rebuilds int
				logs     bytes.Buffer
			)
			th := redisthrottle.New(rdb, prefix, throttle.SharedOptions{Global: c.global, Inbox: c.limits,
				SettleDelay: -1, MaxBatch: 1,
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
				Rebuild: func(context.Context) (throttle.Record, error) {
					mu.Lock()
					defer mu.Unlock()
					rebuilds++
					return rec, nil
				}})
			t.Cleanup(func() { _ = th.Close(context.Background()) })
			ctx := context.Background()
			req := throttle.Request{Inbox: c.inbox, Lease: time.Minute}
			for range 4 {
				tk, err := th.Reserve(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tk.Commit(ctx); err != nil {
					t.Fatal(err)
				}
				mu.Lock()
				rec.Sent = append(rec.Sent, throttle.Sent{Inbox: c.inbox, At: time.Now()})
				mu.Unlock()
			}
			inFlight, err := th.Reserve(ctx, req) // the fifth, still sending
			if err != nil {
				t.Fatal(err)
			}
			defer inFlight.Release(ctx)
			mu.Lock()
			rec.Pending = append(rec.Pending, throttle.Pending{Inbox: c.inbox, Deadline: time.Now().Add(time.Minute)})
			rebuilds = 0 // the first admission initialized the state
			mu.Unlock()
			for _, k := range c.keys {
				if n, err := rdb.Del(ctx, tag+k).Result(); err != nil || n != 1 {
					t.Fatalf("DEL %s: %d, %v", tag+k, n, err)
				}
			}
			tk, err := th.Reserve(ctx, req)
			var rl *throttle.RateLimitedError
			if !errors.As(err, &rl) {
				if tk != nil {
					_, _ = tk.Release(ctx)
				}
				t.Fatalf("after deleting %v: Reserve = %v, want refused (4 sent and 1 in flight, limit 5)", c.keys, err)
			}
			if rebuilds != 1 {
				t.Errorf("rebuilt %d times, want once", rebuilds)
			}
			out := logs.String()
			if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "throttle state incomplete") ||
				!strings.Contains(out, tag+c.keys[0]) {
				t.Errorf("no WARN naming %s:\n%s", tag+c.keys[0], out)
			}
		})
	}
}

// TestExpiredInboxBeginsAgain: an inbox idle past its registration (an
// hour and its lease) has its keys begun afresh, which is no loss: no
// rebuild, and its old sends no longer count.
func TestExpiredInboxBeginsAgain(t *testing.T) {
	t.Parallel()
	prefix, rdb := redistest.Prefix(t), redistest.Client(t)
	tag := "{" + prefix + "}"
	rebuilds := 0
	th := redisthrottle.New(rdb, prefix, throttle.SharedOptions{Inbox: throttle.Limits{PerHour: 2},
		SettleDelay: -1, MaxBatch: 1,
		Rebuild: func(context.Context) (throttle.Record, error) { rebuilds++; return throttle.Record{}, nil }})
	t.Cleanup(func() { _ = th.Close(context.Background()) })
	ctx := context.Background()
	req := throttle.Request{Inbox: "a", Lease: time.Minute}
	for range 2 {
		tk, err := th.Reserve(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// As if its registration had run out: the keys outlive it by 10 s.
	if err := rdb.HSet(ctx, tag+":state", "i:a", "1").Err(); err != nil {
		t.Fatal(err)
	}
	tk, err := th.Reserve(ctx, req)
	if err != nil {
		t.Fatalf("Reserve after the inbox's keys expired: %v, want admitted afresh", err)
	}
	_, _ = tk.Release(ctx)
	if rebuilds != 1 {
		t.Errorf("rebuilt %d times, want once (the first admission's initialization only)", rebuilds)
	}
}
