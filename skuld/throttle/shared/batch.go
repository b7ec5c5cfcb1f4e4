package shared

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// defaultMaxBatch bounds the admissions one call to the backend makes.
const defaultMaxBatch = 64

// DefaultCallTimeout bounds one call to the backend (Options.CallTimeout);
// the callers' own contexts do not, since one client going away must not
// fail the others' admissions.
const DefaultCallTimeout = 5 * time.Second

// errClosed refuses an admission after Close.
var errClosed = errors.New("throttle closed")

// Who holds an ask: its caller, waiting, until the batch answers or the
// caller gives up, whichever comes first.
const (
	waiting int32 = iota
	answered
	abandoned
)

// asking is one Reserve waiting for its batch.
type asking struct {
	ask   throttledriver.Ask
	state atomic.Int32
	done  chan askResult // buffered: the batch never waits for a caller
}

// askResult is a caller's answer. Its ticket holds all of the caller's
// slots: one, or a send's units.
type askResult struct {
	ticket  *ticket
	refusal *throttle.RateLimitedError
	err     error
}

// admissions queues the asks of the batch to come. The goroutine that
// sends batches runs while there are any, and Close waits for it.
type admissions struct {
	mu      sync.Mutex
	queue   []*asking
	running bool
	closed  bool
	idle    sync.WaitGroup // the batch goroutine, while it runs
}

func (a *admissions) close() {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.idle.Wait()
}

// admit queues ask and waits for its answer, or for ctx.
func (s *Throttle) admit(ctx context.Context, ask throttledriver.Ask) (askResult, error) {
	p := &asking{ask: ask, done: make(chan askResult, 1)}
	a := &s.adm
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return askResult{}, s.unavailable(errClosed)
	}
	a.queue = append(a.queue, p)
	if !a.running {
		a.running = true
		a.idle.Add(1)
		go s.sendBatches()
	}
	a.mu.Unlock()
	select {
	case res := <-p.done:
		return res, res.err
	case <-ctx.Done():
		if p.state.CompareAndSwap(waiting, abandoned) {
			return askResult{}, ctx.Err() // the batch releases what it admits for p
		}
		res := <-p.done
		if res.ticket != nil {
			_, _ = res.ticket.Release(context.WithoutCancel(ctx))
		}
		return askResult{}, ctx.Err()
	}
}

// sendBatches sends batches until the queue is empty.
func (s *Throttle) sendBatches() {
	a := &s.adm
	defer a.idle.Done()
	for {
		a.mu.Lock()
		// A caller that gave up before its batch was sent costs nothing.
		a.queue = slices.DeleteFunc(a.queue, func(p *asking) bool { return p.state.Load() == abandoned })
		batch := a.queue
		if len(batch) > s.maxBatch {
			batch = batch[:s.maxBatch:s.maxBatch]
			a.queue = slices.Clone(a.queue[s.maxBatch:])
		} else {
			a.queue = nil
		}
		if len(batch) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		s.sendBatch(batch)
	}
}

// sendBatch admits one batch and answers each of its callers. It asks for
// a block of spare slots of each kind of send in it too (see spares).
func (s *Throttle) sendBatch(batch []*asking) {
	global := s.limits.Load()[0]
	type entry struct {
		ask throttledriver.Ask
		p   *asking // nil for a spare
	}
	type kind struct {
		callers int
		longest time.Duration // lease
	}
	entries := make([]entry, 0, len(batch))
	kinds := map[spareKey]kind{}
	for _, p := range batch {
		entries = append(entries, entry{ask: p.ask, p: p})
		if p.ask.N > 1 {
			continue // a send of several units: spares are one unit each, for sends of one
		}
		k := spareKey{inbox: p.ask.Inbox, limits: p.ask.Limits, global: global}
		kinds[k] = kind{kinds[k].callers + 1, max(kinds[k].longest, p.ask.Lease)}
	}
	for k, c := range kinds {
		if n := s.spares.want(k, c.callers); n > 0 {
			entries = append(entries, entry{ask: throttledriver.Ask{Inbox: k.inbox, Limits: k.limits, Lease: c.longest + spareHold, N: n}})
		}
	}
	// An inbox's asks together, its callers' before its spares: the
	// backend reads its scope once for them. They all arrived while the
	// last call was on its way, so any order is one they could have come
	// in.
	slices.SortStableFunc(entries, func(a, b entry) int {
		if c := strings.Compare(a.ask.Inbox, b.ask.Inbox); c != 0 {
			return c
		}
		return cmp.Compare(boolInt(a.p == nil), boolInt(b.p == nil))
	})
	asks := make([]throttledriver.Ask, len(entries))
	for i, e := range entries {
		asks[i] = e.ask
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.callTimeout)
	defer cancel()
	asked := s.clock.Mono()
	b, err := s.d.Reserve(ctx, global, asks)
	if errors.Is(err, throttledriver.ErrStateLost) {
		if err = s.recover(ctx, err); err == nil {
			b, err = s.d.Reserve(ctx, global, asks)
		}
	}
	if err == nil && len(b.Verdicts) != len(asks) {
		err = errors.New("backend answered a different number of admissions")
	}
	if err != nil {
		for _, e := range entries {
			if e.p != nil {
				s.answer(e.p, askResult{err: s.unavailable(err)})
			}
		}
		return
	}
	s.seen.Store(true)
	callers := make([]bool, len(entries))
	for i, e := range entries {
		callers[i] = e.p != nil
	}
	v := &view{raw: &b.Raw, asks: asks, callers: callers, verdicts: b.Verdicts, global: global, readAt: s.clock.Mono()}
	results, hot := v.judge(s)
	if hot {
		s.heat()
	}
	// The spares are held before any caller is answered: a caller that
	// reads the state as soon as its admission returns must find them this
	// server's, not room taken (the conformance case Spares failed so in
	// CI, about one run in three, when the answer came first).
	// Those not kept go back after the answers, which need not wait for it.
	var back []*block
	for i, e := range entries {
		if e.p == nil && results[i].ticket != nil {
			k := spareKey{inbox: e.ask.Inbox, limits: e.ask.Limits, global: global}
			b := &block{t: results[i].ticket, left: e.ask.Slots(), lease: e.ask.Lease, asked: asked}
			if !s.spares.keep(k, b) {
				back = append(back, b)
			}
		}
	}
	for i, e := range entries {
		if e.p != nil {
			s.answer(e.p, results[i])
		}
	}
	if len(back) > 0 {
		s.spares.give(back)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// answer hands res to p's caller, or, if it gave up, releases what was
// admitted for it.
func (s *Throttle) answer(p *asking, res askResult) {
	if p.state.CompareAndSwap(waiting, answered) {
		p.done <- res
		return
	}
	if res.ticket != nil {
		_, _ = res.ticket.Release(context.Background())
	}
}

// view is a batch's raw state, shared by its tickets: what the backend
// read, and what it admitted in order.
type view struct {
	raw      *throttledriver.Raw
	asks     []throttledriver.Ask
	callers  []bool // a caller's ask, not a block of spares
	verdicts []throttledriver.Verdict
	global   throttle.Limits
	readAt   time.Duration // local mono when the backend answered
}

// judge replays the batch on the state the backend read: every refusal's
// numbers come from it, and a verdict the window rule does not reach on
// the same state is ErrDisagree (a reservation it made is given back). hot
// reports a refusal or an admission near a limit.
func (v *view) judge(s *Throttle) (results []askResult, hot bool) {
	now := v.raw.Now
	results = make([]askResult, len(v.asks))
	g := tally(&v.raw.Global, now, v.global, nil)
	var (
		in      *throttle.Tally
		inboxOf string
	)
	for k, ask := range v.asks {
		if ask.Inbox == "" {
			in = nil
		} else if in == nil || ask.Inbox != inboxOf {
			in, inboxOf = tally(v.raw.Inbox[ask.Inbox], now, ask.Limits, nil), ask.Inbox
		} else {
			in.SetLimits(ask.Limits) // a PATCH may have changed them between two asks
		}
		n := ask.Slots()
		refused, verdict := g.Lacks(n) || in != nil && in.Lacks(n), v.verdicts[k]
		switch {
		case refused && !verdict.Admitted:
			if v.callers[k] { // a block of spares refused is no one's refusal
				results[k].refusal = throttle.Refusal(now, n, g, in)
			}
			hot = true
		case !refused && verdict.Admitted:
			applyFlight(g, now+int64(ask.Lease), n, nil, now)
			if in != nil {
				applyFlight(in, now+int64(ask.Lease), n, nil, now)
			}
			results[k].ticket = &ticket{s: s, v: v, k: k, id: verdict.ID, near: nearLimit(g, in)}
			if v.callers[k] {
				results[k].ticket.n = n
			}
			hot = hot || results[k].ticket.near
		default:
			if verdict.Admitted {
				applyFlight(g, now+int64(ask.Lease), n, nil, now) // as the backend has it
				if in != nil {
					applyFlight(in, now+int64(ask.Lease), n, nil, now)
				}
				for range n {
					(&ticket{s: s, v: v, k: k, id: verdict.ID, near: true}).Release(context.Background())
				}
			}
			results[k].err = throttle.ErrDisagree
		}
		if k == len(v.asks)-1 || v.asks[k+1].Inbox != ask.Inbox {
			s.spares.learned(spareKey{inbox: ask.Inbox, limits: ask.Limits, global: v.global}, roomLeft(g, in))
		}
	}
	return results, hot
}

// snapshot is the windows as ask k's admission saw them, at mono on this
// server's clock, with slots of k counted then (counted) or given back,
// and this server's commits and releases made since counted as what they
// are (mine, given the backend time it was taken at).
func (v *view) snapshot(k int, mono time.Duration, counted bool, slots int, m locals) throttle.Snapshot {
	t := v.at(mono)
	ask := v.asks[k]
	g := tally(&v.raw.Global, t, v.global, m)
	var in *throttle.Tally
	if ask.Inbox != "" {
		in = tally(v.raw.Inbox[ask.Inbox], t, ask.Limits, m)
	}
	for j := range k + 1 {
		if !v.verdicts[j].Admitted {
			continue
		}
		n := v.asks[j].Slots()
		if j == k {
			n -= slots // the other slots of k's block; k's own are counted below
		}
		deadline, id := v.raw.Now+int64(v.asks[j].Lease), v.verdicts[j].ID
		applyFlight(g, deadline, n, m[id], t)
		if in != nil && v.asks[j].Inbox == ask.Inbox {
			applyFlight(in, deadline, n, m[id], t)
		}
	}
	if counted {
		for range slots {
			g.CountAt(t, t)
			if in != nil {
				in.CountAt(t, t)
			}
		}
	}
	snap := throttle.Snapshot{Global: g.State(t, throttle.Global)}
	if in != nil {
		snap.Inbox, snap.HasInbox = in.State(t, throttle.Inbox), true
	}
	return snap
}

// at maps mono, on this server's clock, to the backend's clock.
func (v *view) at(mono time.Duration) int64 { return v.raw.Now + int64(max(mono-v.readAt, 0)) }

// ticket is one admission of a batch.
type ticket struct {
	s    *Throttle
	v    *view
	k    int
	id   int64
	near bool // its admission left a window at 80% or more
	// n is the slots it holds: a send's units; 0 is one (a send, or a
	// spare taken from a block).
	n int
}

// slots is the slots t holds.
func (t *ticket) slots() int { return max(t.n, 1) }

// Commit implements throttle.Ticket: counted at the moment of the call, gathered
// with others or sent at once (see gatherer).
func (t *ticket) Commit(ctx context.Context) (throttle.Snapshot, error) { return t.settle(ctx, true) }

// Release implements throttle.Ticket.
func (t *ticket) Release(ctx context.Context) (throttle.Snapshot, error) { return t.settle(ctx, false) }

func (t *ticket) settle(ctx context.Context, commit bool) (throttle.Snapshot, error) {
	at := t.s.clock.Mono()
	ask := t.v.asks[t.k]
	// What this server holds now, before this settlement may send it all.
	mine := t.s.mine(t.v.at(at), at)
	// One settlement per slot, the same reservation's: the backend counts
	// each, as it does the slots of a block of spares.
	ss := make([]throttledriver.Settlement, t.slots())
	for i := range ss {
		ss[i] = throttledriver.Settlement{ID: t.id, Inbox: ask.Inbox, Commit: commit, Lease: ask.Lease}
	}
	err := t.s.gather.add(ctx, at, t.near || t.s.hot(), ss...)
	snap := t.v.snapshot(t.k, at, commit, t.slots(), mine)
	if err != nil {
		return snap, t.s.unavailable(err)
	}
	return snap, nil
}
