package tests

import (
	"context"
	"log/slog"
	"testing"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
)

// The send pipeline in-process on PostgreSQL, as BenchmarkSendPipeline*,
// with each throttle backend and limits never reached: sends/s with a
// shared backend ÷ memory is what sharing the throttle costs a send. With a
// shared backend the store reads the inbox with every send, as a server
// sharing its database does.

func BenchmarkSendPipelineBackendMemory(b *testing.B) { benchPipelineBackend(b, "memory") }

func BenchmarkSendPipelineBackendPostgres(b *testing.B) { benchPipelineBackend(b, "postgres") }

func BenchmarkSendPipelineBackendRedis(b *testing.B) { benchPipelineBackend(b, "redis") }

func benchPipelineBackend(b *testing.B, backend string) {
	ctx := context.Background()
	dsn := testdb.PostgresURL(b)
	st, inbox := benchStore(b, "postgres", dsn)
	lim := throttle.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}
	o := shared.Options{Global: lim, Inbox: lim}
	benchLayers(b, &o) // NORNWEAVE_BENCH_LAYERS; see pipeline_layers_bench_test.go
	calls := &backendCalls{}
	var th throttle.Throttle
	switch backend {
	case "memory":
		th = throttle.NewMemory(throttle.NewGlobalRateLimiter(lim, lim), clock.NewSystem())
	case "postgres":
		pool, err := openCountedPool(ctx, dsn, 4, calls) // as the server's throttle pool
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(pool.Close)
		th = pgthrottle.New(pool, o)
	case "redis":
		rdb := redistest.Client(b)
		rdb.AddHook(calls)
		th = redisthrottle.New(rdb, redistest.Prefix(b), o)
	}
	b.Cleanup(func() { _ = th.Close(ctx) })
	if backend != "memory" {
		st.ShareDatabase()
	}
	sender := skuld.NewSender(skuld.Options{Store: st, Provider: providers.NewDemo(slog.New(slog.DiscardHandler)),
		Throttle: th})
	stopHot := keepHot(b, st, sender) // NORNWEAVE_BENCH_HOT
	calls.reset()                     // count the measured sends' calls only
	runSends(b, sender, inbox)
	b.StopTimer()
	stopHot()
	if backend != "memory" {
		calls.report(b)
	}
}
