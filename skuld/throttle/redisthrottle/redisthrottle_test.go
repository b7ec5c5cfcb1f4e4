package redisthrottle_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/tcpproxy"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// TestConformance runs the backend conformance suite on the real Redis,
// under a key prefix of each case's own. Two throttles of one case have
// separate clients, like two servers.
func TestConformance(t *testing.T) {
	t.Parallel()
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		prefix := redistest.Prefix(t)
		rdb := redistest.Client(t)
		tag := "{" + prefix + "}"
		initState(t, rdb, prefix)
		clock := clocktest.New(time.Now())
		proxy := tcpproxy.Start(t, rdb.Options().Addr)
		return throttletest.Backend{
			New: func(o throttletest.Options) throttle.Throttle {
				opts := *rdb.Options()
				opts.Addr = proxy.Addr()
				c := redis.NewClient(&opts)
				t.Cleanup(func() { c.Close() })
				th := redisthrottle.New(c, prefix, shared.Options{Global: o.Global, CallTimeout: throttletest.CallTimeout,
					Inbox: o.Inbox, Clock: clock, SettleDelay: o.Settle(), Rebuild: o.Rebuild})
				t.Cleanup(func() { _ = th.Close(context.Background()) })
				return th
			},
			Advance: func(d time.Duration) { clock.Advance(d); shift(t, rdb, tag, d) },
			Margin:  shared.DefaultLeaseMargin,
			Lose:    func() { deleteAll(t, rdb, tag) },
			Stall:   proxy.Hold,
			Shared:  true,
			Weights: true,
			Spans:   true,
			// Redis stamps with its own TIME, which runs on: Advance
			// shifts the stored times instead.
			RunningClock: true,
		}
	})
}

// initState writes an empty state under prefix, as the first server to
// use a Redis does: each case begins with the state present.
func initState(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	th := redisthrottle.New(rdb, prefix, shared.Options{})
	defer th.Close(context.Background())
	if _, err := th.State(context.Background(), "", throttle.Override{}); err != nil {
		t.Fatal(err)
	}
}

// shiftScript moves the times of one key d µs (ARGV[1]) into the past: a
// flights set's scores exactly, and a bucket hash's buckets (width
// ARGV[2] µs) each to the one holding the last instant of its sends.
var shiftScript = redis.NewScript(`
local d, w = tonumber(ARGV[1]), tonumber(ARGV[2])
if redis.call('TYPE', KEYS[1]).ok == 'zset' then
  local z = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
  for i = 1, #z, 2 do
    redis.call('ZADD', KEYS[1], string.format('%.0f', tonumber(z[i + 1]) - d), z[i])
  end
  return 1
end
local kv = redis.call('HGETALL', KEYS[1])
redis.call('DEL', KEYS[1])
for i = 1, #kv, 2 do
  if kv[i] == '_' then
    redis.call('HSET', KEYS[1], '_', kv[i + 1])
  else
  local b = math.floor(((tonumber(kv[i]) + 1) * w - 1 - d) / w)
  redis.call('HINCRBY', KEYS[1], string.format('%.0f', b), tonumber(kv[i + 1]))
  end
end
return 1
`)

// shift moves every stored time of the prefix d into the past, as if d
// had passed on Redis's clock.
func shift(t *testing.T, rdb *redis.Client, tag string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	for _, k := range keys(t, rdb, tag) {
		var width time.Duration
		switch {
		case strings.HasSuffix(k, ":s"):
			width = 100 * time.Millisecond
		case strings.HasSuffix(k, ":m"):
			width = time.Second
		case strings.HasSuffix(k, ":h"):
			width = time.Minute
		case strings.HasSuffix(k, ":d"):
			width = 15 * time.Minute
		case strings.HasSuffix(k, ":f"):
		default:
			continue
		}
		if err := shiftScript.Run(ctx, rdb, []string{k}, d.Microseconds(), width.Microseconds()).Err(); err != nil {
			t.Fatalf("shift %s: %v", k, err)
		}
	}
}

func deleteAll(t *testing.T, rdb *redis.Client, tag string) {
	t.Helper()
	if ks := keys(t, rdb, tag); len(ks) > 0 {
		if err := rdb.Del(context.Background(), ks...).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

func keys(t *testing.T, rdb *redis.Client, tag string) []string {
	t.Helper()
	var out []string
	iter := rdb.Scan(context.Background(), 0, tag+":*", 500).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// BenchmarkReserveCommit: one goroutine; far from every limit the commit
// is gathered, so the pair costs the admission's round trip.
func BenchmarkReserveCommit(b *testing.B) { benchReserveCommit(b, 0) }

// BenchmarkReserveCommitAtOnce sends each commit at once, as near a limit:
// two round trips.
func BenchmarkReserveCommitAtOnce(b *testing.B) { benchReserveCommit(b, -1) }

func benchReserveCommit(b *testing.B, settleDelay time.Duration) {
	th := redisthrottle.New(redistest.Client(b), redistest.Prefix(b), shared.Options{
		Global: throttletest.BenchLimits, Inbox: throttletest.BenchLimits, SettleDelay: settleDelay})
	defer th.Close(context.Background())
	throttletest.BenchReserveCommit(b, th)
}
