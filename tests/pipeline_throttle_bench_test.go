package tests

import (
	"log/slog"
	"testing"

	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
)

// The send pipeline in-process on PostgreSQL, as BenchmarkSendPipeline*,
// with each throttle backend and limits never reached: sends/s with a
// shared backend ÷ memory is what sharing the throttle costs a send.

func BenchmarkSendPipelineBackendMemory(b *testing.B) { benchPipelineBackend(b, "memory") }

func BenchmarkSendPipelineBackendPostgres(b *testing.B) { benchPipelineBackend(b, "postgres") }

func BenchmarkSendPipelineBackendRedis(b *testing.B) { benchPipelineBackend(b, "redis") }

func benchPipelineBackend(b *testing.B, backend string) {
	dsn := testdb.PostgresURL(b)
	st, inbox := benchStore(b, "postgres", dsn)
	lim := skuld.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}
	var th skuld.Throttle
	switch backend {
	case "memory":
		l := skuld.NewGlobalRateLimiter(lim.PerMinute, lim.PerHour)
		l.SetInboxDefaults(lim.PerMinute, lim.PerHour)
		th = skuld.NewMemoryThrottle(l, skuld.NewSystemClock())
	case "postgres":
		db, err := skuld.OpenPostgresThrottleDB(dsn, 4) // as the server's throttle pool
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		th = skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: lim, Inbox: lim})
	case "redis":
		th = skuld.NewRedisThrottle(redistest.Client(b), skuld.RedisOptions{Global: lim, Inbox: lim,
			KeyPrefix: redistest.Prefix(b)})
	}
	runSends(b, skuld.NewSender(skuld.Options{Store: st, Provider: providers.NewDemo(slog.New(slog.DiscardHandler)),
		Throttle: th}), inbox)
}
