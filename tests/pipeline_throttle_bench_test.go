package tests

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/redistest"
	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// The send pipeline in-process on PostgreSQL, as BenchmarkSendPipeline*,
// with each throttle backend and limits never reached: sends/s with a
// shared backend ÷ memory is what sharing the throttle costs a send.

func BenchmarkSendPipelineBackendMemory(b *testing.B) { benchPipelineBackend(b, "memory") }

func BenchmarkSendPipelineBackendPostgres(b *testing.B) { benchPipelineBackend(b, "postgres") }

func BenchmarkSendPipelineBackendRedis(b *testing.B) { benchPipelineBackend(b, "redis") }

func benchPipelineBackend(b *testing.B, backend string) {
	ctx := context.Background()
	dsn := testdb.PostgresURL(b)
	st, err := store.Open(ctx, store.Options{Driver: "postgres", DSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	inbox := &store.Inbox{ID: "bench-inbox", EmailAddress: "bench@acme.test", Name: "Bench",
		CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if err := st.CreateInbox(ctx, inbox); err != nil {
		b.Fatal(err)
	}
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
	sender := skuld.NewSender(skuld.Options{Store: st, Provider: providers.NewDemo(slog.New(slog.DiscardHandler)),
		Throttle: th})
	req := skuld.SendRequest{InboxID: inbox.ID, To: address.MustParseList("ann@customer.test"), Subject: "Benchmark",
		Body: "Hello **Ann**, this is a benchmark message."}

	b.ReportAllocs()
	b.SetParallelism(4) // 4×GOMAXPROCS senders keep the database busy
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m, err := sender.Send(ctx, req)
			if err != nil || m.Status != store.StatusSent {
				panic(fmt.Sprintf("send: %v %+v", err, m))
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}
