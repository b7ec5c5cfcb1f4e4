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
// p50/p99 latency of the pair as extra metrics. A shared backend gathers
// commits far from every limit (sent within 10 ms, many at once), so the
// pair is the admission's round trip; the NearLimit variants send each
// commit at once, as near a limit: two round trips.

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

func BenchmarkThrottleReserveCommitPostgresNearLimit(b *testing.B) {
	url := testdb.PostgresURL(b)
	db := openDB(b, url)
	if err := migrateDB(db); err != nil {
		b.Fatal(err)
	}
	benchReserveCommit(b, flushing{skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: benchLimits, Inbox: benchLimits})})
}

func BenchmarkThrottleReserveCommitRedis(b *testing.B) {
	benchReserveCommit(b, skuld.NewRedisThrottle(redistest.Client(b),
		skuld.RedisOptions{Global: benchLimits, Inbox: benchLimits, KeyPrefix: redistest.Prefix(b)}))
}

func BenchmarkThrottleReserveCommitRedisNearLimit(b *testing.B) {
	benchReserveCommit(b, flushing{skuld.NewRedisThrottle(redistest.Client(b),
		skuld.RedisOptions{Global: benchLimits, Inbox: benchLimits, KeyPrefix: redistest.Prefix(b)})})
}

// flushing sends each commit at once, as a shared backend does near a
// limit.
type flushing struct {
	skuld.Throttle
}

func (f flushing) ReserveInbox(ctx context.Context, lease time.Duration, inboxID string, o skuld.Override) (skuld.Ticket, error) {
	tk, err := f.Throttle.ReserveInbox(ctx, lease, inboxID, o)
	if err != nil {
		return nil, err
	}
	return flushingTicket{tk, f.Throttle.(interface{ Flush(context.Context) error })}, nil
}

type flushingTicket struct {
	skuld.Ticket
	f interface{ Flush(context.Context) error }
}

func (t flushingTicket) Commit(ctx context.Context) error {
	if err := t.Ticket.Commit(ctx); err != nil {
		return err
	}
	return t.f.Flush(ctx)
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
