package shared

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// DefaultSettleDelay is how long commits and releases far from every limit
// are gathered, by default.
const DefaultSettleDelay = 50 * time.Millisecond

// hotFor is how long after an admission near a limit, or a refusal, every
// commit and release goes at once.
const hotFor = 2 * time.Second

// A gatherer holds a shared throttle's commits and releases far from every
// limit for a few milliseconds and sends them together: one call settles
// many sends, where one each would cost as much as the admission. Each
// commit counts at the moment it was made (the backend is told its age),
// so gathering delays only when other servers see it: until then it counts
// as in flight, which takes the same room. Near a limit each goes at once,
// so that a refusal's Retry-After, which assumes a send in flight may still
// go out at its deadline, is not made late by a send that has finished:
// when its admission left a window at 80% or more, and for hotFor after
// this server saw such an admission or a refusal (a send admitted early may
// finish after the window filled). This server's own reads count what it
// holds as the backend will (mine). A server killed with commits pending
// leaves their reservations to be counted at their deadlines, as after any
// crash, and so does a call the backend failed: it is not sent again, since
// the backend may have applied it, and a commit applied twice would count
// twice.
//
// Its goroutine is started by newGatherer and stopped by close, which
// sends what is pending first.
type gatherer struct {
	d       throttledriver.Driver
	clock   clock.Clock
	delay   time.Duration
	timeout time.Duration // of a flush's call
	logger  *slog.Logger

	mu      sync.Mutex
	pending []*held // in the order made; those in transit stay until the backend took them
	calls   uint64  // flush calls so far

	wake chan struct{} // buffered 1: something to send later
	stop chan struct{}
	done chan struct{}
}

// held is a settlement made at at (local mono) that the backend has not
// taken yet: waiting, or in transit (sending) in a call under way, which
// this server's reads still count as the backend will.
type held struct {
	s  throttledriver.Settlement
	at time.Duration
	// call is the flush call carrying it, 0 while it waits.
	call uint64
}

func newGatherer(d throttledriver.Driver, c clock.Clock, delay, timeout time.Duration, logger *slog.Logger) *gatherer {
	if delay == 0 {
		delay = DefaultSettleDelay
	}
	g := &gatherer{d: d, clock: c, delay: delay, timeout: timeout, logger: logger,
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go g.run()
	return g
}

// add holds ss, made at at, and sends everything held at once if now is
// set (near a limit), else within the delay.
func (g *gatherer) add(ctx context.Context, at time.Duration, now bool, ss ...throttledriver.Settlement) error {
	g.mu.Lock()
	for _, s := range ss {
		g.pending = append(g.pending, &held{s: s, at: at})
	}
	g.mu.Unlock()
	if now || g.delay < 0 {
		return g.flush(ctx)
	}
	g.signal()
	return nil
}

func (g *gatherer) signal() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *gatherer) run() {
	defer close(g.done)
	for {
		select {
		case <-g.stop:
			return
		case <-g.wake:
		}
		select {
		case <-g.stop:
			return
		case <-time.After(g.delay):
		}
		ctx, cancel := context.WithTimeout(context.Background(), g.timeout)
		err := g.flush(ctx)
		cancel()
		if err != nil {
			g.logger.Warn("throttle backend did not take commits and releases; their reservations count "+
				"until their deadlines", slog.String("backend", g.d.Name()), slog.Any("error", err))
		}
	}
}

// flush sends what is held and not already in transit. What a failed call
// carried is not sent again: the backend may have applied it, and a commit
// applied twice counts twice. Its reservations count until their
// deadlines instead, as after a crash: the safe side, and once.
func (g *gatherer) flush(ctx context.Context) error {
	g.mu.Lock()
	g.calls++
	call := g.calls
	var batch []*held
	for _, h := range g.pending {
		if h.call == 0 {
			h.call = call
			batch = append(batch, h)
		}
	}
	g.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	now := g.clock.Mono()
	out := make([]throttledriver.Settlement, len(batch))
	for i, h := range batch {
		out[i] = h.s
		out[i].Age = max(now-h.at, 0)
	}
	err := g.d.Settle(ctx, out)
	g.mu.Lock()
	g.pending = slices.DeleteFunc(g.pending, func(h *held) bool { return h.call == call })
	g.mu.Unlock()
	return err
}

// mine returns what is held, by reservation id, each with the moment it
// was made on the backend's clock, given the backend's now and this
// server's mono at that moment.
func (g *gatherer) mine(backendNow int64, mono time.Duration) locals {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.pending) == 0 {
		return nil
	}
	m := make(locals, len(g.pending))
	for _, h := range g.pending {
		m[h.s.ID] = append(m[h.s.ID], local{commit: h.s.Commit, at: backendNow - int64(max(mono-h.at, 0))})
	}
	return m
}

// close stops the goroutine and sends what is held; safe to call once.
func (g *gatherer) close(ctx context.Context) error {
	close(g.stop)
	<-g.done
	return g.flush(ctx)
}
