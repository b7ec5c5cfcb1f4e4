package shared_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver/drivertest"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// TestMemDriver runs the driver suite on the in-memory driver: the fake
// Shared's own cases run over keeps the contract the real drivers keep.
func TestMemDriver(t *testing.T) {
	drivertest.Run(t, func(t *testing.T) drivertest.Harness {
		d := newMemDriver(clock.NewSystem())
		return drivertest.Harness{Driver: d, Lose: map[drivertest.Part]func(*testing.T){drivertest.All: d.Lose,
			drivertest.GlobalMinute: func(*testing.T) { d.LosePart("the global minute buckets") }}}
	})
}

// memBackend is a shared throttle's state in a memDriver on a test's
// clock, fresh for one case.
func memBackend(t *testing.T) throttletest.Backend {
	d := newMemDriver(clocktest.New(time.Now()))
	d.present = true // as a backend some server has written to
	return throttletest.Backend{
		New: func(o throttletest.Options) throttle.Throttle {
			th := shared.New(d, shared.Options{Global: o.Global, Inbox: o.Inbox, Clock: d.clock, CallTimeout: throttletest.CallTimeout,
				SettleDelay: o.SettleDelay, Rebuild: o.Rebuild})
			t.Cleanup(func() { _ = th.Close(context.Background()) })
			return th
		},
		Advance: d.Advance,
		Margin:  shared.DefaultLeaseMargin,
		Lose:    func() { d.Lose(t) },
		Stall:   d.Stall,
		Shared:  true,
		Weights: true,
		Spans:   true,
	}
}

// TestConformance runs the Throttle conformance suite on Shared over the
// in-memory driver; pgthrottle and redisthrottle run it on theirs.
func TestConformance(t *testing.T) {
	throttletest.Run(t, memBackend)
}

// TestShared runs Shared's own cases, about what it does the same over
// every driver (gathering, spares), once, over the in-memory driver.
func TestShared(t *testing.T) {
	for _, c := range []struct {
		name string
		run  func(t *testing.T, b throttletest.Backend)
	}{
		{"CommitsGatheredFarFromLimits", testGathered},
		{"CommitsAtOnceNearLimits", testNearLimit},
		{"Spares", testSpares},
		{"SparesKeepThePromise", testSparesKeepThePromise},
		{"SparesOfADeadServer", testSparesOfADeadServer},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t, memBackend(t)) })
	}
}

// TestIncompleteStateRebuiltOnce: a part of the state gone on its own (a
// key deleted or evicted) is found by whichever servers touch it next; the
// state is rebuilt from the send record once, logged once at WARN naming
// the part, and the send that would exceed the limit is refused.
func TestIncompleteStateRebuiltOnce(t *testing.T) {
	d := newMemDriver(clocktest.New(time.Now()))
	d.present = true
	var (
		mu       sync.Mutex
		logs     bytes.Buffer
		rebuilds int
		rec      throttledriver.Record
	)
	logger := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: &logs}, nil))
	lim := throttle.Limits{PerMinute: 3}
	servers := make([]*shared.Throttle, 3)
	for i := range servers {
		servers[i] = shared.New(d, shared.Options{Global: lim, Clock: d.clock, SettleDelay: -1, Logger: logger,
			Rebuild: func(context.Context) (throttledriver.Record, error) {
				mu.Lock()
				defer mu.Unlock()
				rebuilds++
				return rec, nil
			}})
		t.Cleanup(func() { _ = servers[i].Close(context.Background()) })
	}
	for i := range 3 {
		tk, err := servers[i].Reserve(ctx, throttle.Request{Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		rec.Sent = append(rec.Sent, throttledriver.Sent{At: d.clock.Now()})
		mu.Unlock()
	}
	d.LosePart("the key {p}:g:m")
	var wg sync.WaitGroup
	errs := make([]error, len(servers))
	for i, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, err := s.Reserve(ctx, throttle.Request{Lease: time.Minute})
			if err == nil {
				_, _ = tk.Release(ctx)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		var rl *throttle.RateLimitedError
		if !errors.As(err, &rl) {
			t.Errorf("server %d: %v, want refused: the record holds 3 sends, the limit", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if rebuilds < 1 {
		t.Errorf("rebuilt %d times, want at least once", rebuilds)
	}
	out := logs.String()
	if n := strings.Count(out, "level=WARN"); n != 1 || !strings.Contains(out, "throttle state incomplete") ||
		!strings.Contains(out, "the key {p}:g:m") {
		t.Errorf("want one WARN naming the key, got %d:\n%s", n, out)
	}
}

// lockedWriter lets several servers' loggers share one buffer.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestFailedSettlementNotSentAgain: a settlement whose call failed may have
// been applied (a timeout after the backend took it); sent again, a commit
// counted twice. It is not sent again: its reservation would count until
// its deadline had the backend not taken it, the safe side, once.
func TestFailedSettlementNotSentAgain(t *testing.T) {
	d := newMemDriver(clocktest.New(time.Now()))
	d.present = true
	lim := throttle.Limits{PerMinute: 1000}
	th := shared.New(d, shared.Options{Global: lim, Clock: d.clock, SettleDelay: -1})
	other := shared.New(d, shared.Options{Global: lim, Clock: d.clock})
	t.Cleanup(func() { _ = other.Close(context.Background()) })
	tk, err := th.Reserve(ctx, throttle.Request{Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	d.mu.Lock()
	d.settleFails = 1
	d.mu.Unlock()
	_, _ = tk.Commit(ctx) // sent at once: its call fails
	_ = th.Close(ctx)     // sends what is still held
	st, err := other.State(ctx, "", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	if g := st.Global.PerMinute; g.Used != 1 {
		t.Fatalf("another server sees %+v, want the one send counted once", g)
	}
}
