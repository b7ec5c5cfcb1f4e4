package skuld_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/skuld"
)

// Reserve+Commit of one send through each backend, one goroutine, limits
// never reached, both global windows and an inbox's on: ns/op, and the
// p50/p99 latency of the pair as extra metrics.

var benchLimits = skuld.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}

func BenchmarkThrottleReserveCommitMemory(b *testing.B) {
	l := skuld.NewGlobalRateLimiter(benchLimits.PerMinute, benchLimits.PerHour)
	l.SetInboxDefaults(benchLimits.PerMinute, benchLimits.PerHour)
	benchReserveCommit(b, skuld.NewMemoryThrottle(l, skuld.NewSystemClock()))
}

func BenchmarkThrottleReserveCommitPostgres(b *testing.B) {
	url := testdb.PostgresURL(b)
	db := openDB(b, url)
	if err := migrateDB(db); err != nil {
		b.Fatal(err)
	}
	benchReserveCommit(b, skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: benchLimits, Inbox: benchLimits}))
}

func BenchmarkThrottleReserveCommitRedis(b *testing.B) {
	benchReserveCommit(b, skuld.NewRedisThrottle(redistest.Client(b),
		skuld.RedisOptions{Global: benchLimits, Inbox: benchLimits, KeyPrefix: redistest.Prefix(b)}))
}

func benchReserveCommit(b *testing.B, th skuld.Throttle) {
	ctx := context.Background()
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		tk, err := th.ReserveInbox(ctx, time.Minute, "bench-inbox", skuld.Override{})
		if err != nil {
			b.Fatal(err)
		}
		if err := tk.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[n*99/100].Nanoseconds()), "p99-ns")
	}
}
