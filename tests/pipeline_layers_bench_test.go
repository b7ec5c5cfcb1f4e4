package tests

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/store"
)

// What the layers of the shared throttle keep (issue 27,
// scripts/bench-layers.sh): BenchmarkSendPipelineBackend* read these from
// the environment, so that one test binary measures every configuration.
//
//   - NORNWEAVE_BENCH_LAYERS: all (the defaults, also when unset), none
//     (MaxBatch 1, SettleDelay < 0), batch (the admissions batcher only:
//     SettleDelay < 0), gather (the commit gatherer only: MaxBatch 1).
//     Spares are on in every one.
//   - NORNWEAVE_BENCH_HOT: an interval, e.g. 500ms. Before the run and
//     then every interval, a send from a second inbox whose limit (1 a
//     minute, 1 an hour) is already reached is refused, so a shared
//     throttle stays hot all run long (spares drained, commits sent at
//     once; hot lasts 2 s after a refusal). Memory gets the same sends.
//
// Each run reports what reached the backend per send, counted by a pgx
// tracer or a go-redis hook: admission calls, asks per call, spare slots
// asked, settlement calls.

// benchLayers applies NORNWEAVE_BENCH_LAYERS to o.
func benchLayers(b *testing.B, o *shared.Options) {
	switch l := os.Getenv("NORNWEAVE_BENCH_LAYERS"); l {
	case "", "all":
	case "none":
		o.MaxBatch, o.SettleDelay = 1, -1
	case "batch":
		o.SettleDelay = -1
	case "gather":
		o.MaxBatch = 1
	default:
		b.Fatalf("NORNWEAVE_BENCH_LAYERS=%q: want all, none, batch or gather", l)
	}
}

// backendCalls counts what a shared throttle sent its backend.
type backendCalls struct {
	reserves, asks, spareSlots, settles atomic.Int64
}

func (c *backendCalls) reserve(asks int, slots []int) {
	c.reserves.Add(1)
	c.asks.Add(int64(asks))
	for _, n := range slots {
		if n > 1 {
			c.spareSlots.Add(int64(n))
		}
	}
}

func (c *backendCalls) reset() {
	for _, n := range []*atomic.Int64{&c.reserves, &c.asks, &c.spareSlots, &c.settles} {
		n.Store(0)
	}
}

func (c *backendCalls) report(b *testing.B) {
	n := float64(b.N)
	b.ReportMetric(float64(c.reserves.Load())/n, "reserves/send")
	if r := c.reserves.Load(); r > 0 {
		b.ReportMetric(float64(c.asks.Load())/float64(r), "asks/reserve")
	}
	b.ReportMetric(float64(c.spareSlots.Load())/n, "spareslots/send")
	b.ReportMetric(float64(c.settles.Load())/n, "settles/send")
}

// TraceQueryStart counts pgthrottle's admission and settlement calls.
func (c *backendCalls) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	switch {
	case strings.Contains(d.SQL, "pgthrottle_reserve(") && len(d.Args) > 2:
		ns, _ := d.Args[2].([]int32)
		slots := make([]int, len(ns))
		for i, n := range ns {
			slots[i] = int(n)
		}
		c.reserve(len(ns), slots)
	case strings.Contains(d.SQL, "pgthrottle_settle("):
		c.settles.Add(1)
	}
	return ctx
}

// TraceQueryEnd implements pgx.QueryTracer.
func (c *backendCalls) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// openCountedPool is pgthrottle.OpenPool with c as its tracer.
func openCountedPool(ctx context.Context, dsn string, conns int, c *backendCalls) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.ConnConfig.Tracer = c
	cfg.MaxConns, cfg.MinConns = int32(conns), 0
	return pgxpool.NewWithConfig(ctx, cfg)
}

// DialHook implements redis.Hook.
func (c *backendCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook implements redis.Hook.
func (c *backendCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook counts redisthrottle's scripts by their first key: the
// admission script's is the id sequence (args: 2 global limits, the number
// of inboxes, a name and a TTL each, then 6 per ask, the slots last); the
// settlement's and the read's the state key, the settlement's with 6 args
// or more (the number of inboxes, their names, 5 per settlement).
func (c *backendCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if name := strings.ToLower(cmd.Name()); (name == "evalsha" || name == "eval") && len(a) > 3 {
			nkeys, _ := a[2].(int)
			key, _ := a[3].(string)
			switch {
			case strings.HasSuffix(key, ":seq") && len(a) >= 3+nkeys+3:
				nin, _ := a[3+nkeys+2].(int)
				args := a[min(3+nkeys+3+2*nin, len(a)):]
				var slots []int
				for i := 5; i < len(args); i += 6 {
					n, _ := args[i].(int)
					slots = append(slots, n)
				}
				c.reserve(len(args)/6, slots)
			case strings.HasSuffix(key, ":state") && len(a)-3-nkeys >= 6:
				c.settles.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

// keepHot starts NORNWEAVE_BENCH_HOT's refused sends, if set, and returns
// what stops them; the first refusal happens before it returns.
func keepHot(b *testing.B, st *store.Store, sender *skuld.Sender) (stop func()) {
	every := os.Getenv("NORNWEAVE_BENCH_HOT")
	if every == "" {
		return func() {}
	}
	d, err := time.ParseDuration(every)
	if err != nil || d <= 0 {
		b.Fatalf("NORNWEAVE_BENCH_HOT=%q: want a positive duration", every)
	}
	ctx := context.Background()
	one := 1
	in := &store.Inbox{ID: "bench-hot-inbox", EmailAddress: "hot@acme.test", Name: "Hot",
		RateLimitPerMinute: &one, RateLimitPerHour: &one, CreatedAt: time.Now().UTC(), UpdatedAt: time.Now().UTC()}
	if err := st.CreateInbox(ctx, in); err != nil {
		b.Fatal(err)
	}
	req := skuld.SendRequest{InboxID: in.ID, To: address.MustParseList("bob@customer.test"), Subject: "Hot", Body: "Refused."}
	var refused atomic.Int64
	send := func() error {
		_, err := sender.Send(ctx, req)
		var rl *throttle.RateLimitedError
		if errors.As(err, &rl) {
			refused.Add(1)
			return nil
		}
		return err
	}
	for range 2 { // the first fills the inbox's windows; the second is refused
		if err := send(); err != nil {
			b.Fatal(err)
		}
	}
	if refused.Load() != 1 {
		b.Fatalf("hot inbox: %d refusals of 2 sends, want 1", refused.Load())
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				if err := send(); err != nil {
					panic(fmt.Sprintf("hot send: %v", err))
				}
			}
		}
	})
	start := refused.Load()
	return func() {
		close(done)
		wg.Wait()
		b.ReportMetric(float64(refused.Load()-start), "hot-refusals")
	}
}
