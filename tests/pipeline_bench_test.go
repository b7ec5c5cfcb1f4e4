package tests

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/store"
)

// The send pipeline in-process (no HTTP): load inbox → domain filter →
// throttle → record "sending" → demo provider → record the outcome, on a
// real database. Throttled variants use limits that are never reached, so
// the difference to the unthrottled ones is what the throttle costs.

func BenchmarkSendPipelineSQLite(b *testing.B) {
	benchPipeline(b, "sqlite", 0)
}

func BenchmarkSendPipelineSQLiteThrottled(b *testing.B) {
	benchPipeline(b, "sqlite", 1<<30)
}

func BenchmarkSendPipelinePostgres(b *testing.B) {
	benchPipeline(b, "postgres", 0)
}

func BenchmarkSendPipelinePostgresThrottled(b *testing.B) {
	benchPipeline(b, "postgres", 1<<30)
}

func benchPipeline(b *testing.B, driver string, limit int) {
	dsn := testdb.SQLitePath(b)
	if driver == "postgres" {
		dsn = testdb.PostgresURL(b)
	}
	st, inbox := benchStore(b, driver, dsn)
	policy, err := filter.New(`(.*\.)?customer\.test`, `evil\.test`)
	if err != nil {
		b.Fatal(err)
	}
	lim := throttle.Limits{PerMinute: limit, PerHour: limit}
	th := throttle.NewMemory(throttle.NewGlobalRateLimiter(lim, throttle.Limits{}), clock.NewSystem())
	runSends(b, skuld.NewSender(skuld.Options{Store: st, Provider: providers.NewDemo(slog.New(slog.DiscardHandler)),
		Throttle: th, Filter: policy}), inbox)
}

// benchStore opens and migrates the database dsn of driver and creates the
// inbox the benchmark sends from.
func benchStore(b *testing.B, driver, dsn string) (*store.Store, *store.Inbox) {
	ctx := context.Background()
	o := store.Options{Driver: driver, DSN: dsn}
	if driver == "postgres" {
		o.Schemas = []store.Schema{{Name: "pgthrottle", Migrate: pgthrottle.Migrate, Current: pgthrottle.Current}}
	}
	st, err := store.Open(ctx, o)
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
	return st, inbox
}

// runSends sends one small message from inbox per iteration, from
// 4×GOMAXPROCS goroutines, and reports sends/s.
func runSends(b *testing.B, sender *skuld.Sender, inbox *store.Inbox) {
	ctx := context.Background()
	req := skuld.SendRequest{InboxID: inbox.ID, To: address.MustParseList("ann@customer.test"), Subject: "Benchmark",
		Body: "Hello **Ann**, this is a benchmark message."}
	b.ReportAllocs()
	b.SetParallelism(4) // 4×GOMAXPROCS senders keep the database busy
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := sender.Send(ctx, req)
			if err != nil || res.Message.Status != store.StatusSent {
				panic(fmt.Sprintf("send: %v %+v", err, res.Message))
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "sends/s")
}
