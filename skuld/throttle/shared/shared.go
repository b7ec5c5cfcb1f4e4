// Package shared is the throttle.Throttle several servers share: one
// implementation over a throttledriver.Driver, which keeps the raw state in
// PostgreSQL (package pgthrottle) or Redis (package redisthrottle), so that
// both backends behave alike. The window rule, Retry-After and the headers
// come from package throttle's Tally, the limiter's own code; batching,
// gathering, spares and recovery are this package's.
package shared

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// DefaultLeaseMargin is added to a send's lease before a shared backend
// reclaims its reservation: the server measured the lease on its own clock,
// the backend on its own, and the two may drift apart a little.
const DefaultLeaseMargin = 5 * time.Second

// Options configures a Throttle.
type Options struct {
	Global, Inbox throttle.Limits // the global limits and the inbox defaults
	// Clock is this server's clock: the age of a gathered commit and the
	// hot rule are measured on its monotonic axis. Nil: the system clock.
	Clock       clock.Clock
	LeaseMargin time.Duration // 0: DefaultLeaseMargin
	// SettleDelay is how long commits and releases far from every limit
	// are gathered before they are sent together; 0: DefaultSettleDelay;
	// negative: never, each is sent at once (what gathering saves is
	// measured against that).
	SettleDelay time.Duration
	// MaxBatch bounds the admissions one call to the backend makes; 0:
	// 64. 1 sends each admission alone (what batching saves is measured
	// against that).
	MaxBatch int
	// CallTimeout bounds one call to the backend (a batch of admissions, a
	// flush of gathered commits); 0: DefaultCallTimeout. A flush given up
	// is not sent again (the backend may have applied it): its sends count
	// at their deadlines, the safe side.
	CallTimeout time.Duration
	// Rebuild reads the durable send record a lost state is rebuilt from
	// (the database's send_log). Nil: a lost state is rebuilt empty.
	Rebuild func(context.Context) (throttledriver.Record, error)
	Logger  *slog.Logger
}

// Throttle is a throttle.Throttle whose windows live in a backend that several
// servers share, through a Driver. Every backend gets the same behaviour:
//
//   - Admissions are batched: while one call to the backend is on its
//     way, the requests that arrive wait for the next, which admits them
//     all (up to maxBatch) in one atomic step, each judged exactly as if
//     alone. An idle server's admission goes at once; a busy one's share
//     the fixed cost of a call. A caller that gives up takes nothing: a
//     reservation made for it meanwhile is released.
//   - A refusal's Retry-After, counts and windows come from the state the
//     backend read in the step that refused; if the window rule finds room
//     in that state, the answer is ErrDisagree, never a made-up refusal.
//   - Far from every limit a call also takes a few spare admissions, from
//     which the next sends of the same kind are admitted without a call
//     for up to a second (see spares).
//   - Commits and releases are gathered (see gatherer).
//   - A lost state (ErrStateLost) is rebuilt from the durable send record
//     before anything is admitted, and logged.
//
// Its background work (the gatherer's and the spares' goroutines, a running
// batch) belongs to it: Close sends what is pending and stops it. It is
// safe for concurrent use, by goroutines and by servers.
type Throttle struct {
	d       throttledriver.Driver
	clock   clock.Clock
	margin  time.Duration
	rebuild func(context.Context) (throttledriver.Record, error)
	logger  *slog.Logger
	limits  atomic.Pointer[[2]throttle.Limits] // global, inbox default

	adm         admissions
	maxBatch    int
	callTimeout time.Duration
	gather      *gatherer
	spares      *spares
	hotUntil    atomic.Int64 // local mono ns; see gatherer
	seen        atomic.Bool  // the state was found present since start

	recovering sync.Mutex
	closeOnce  sync.Once
	closeErr   error
}

// New returns a shared throttle over d and starts its background
// work; Close stops it.
func New(d throttledriver.Driver, o Options) *Throttle {
	mustNotBeNegative(o.Global)
	mustNotBeNegative(o.Inbox)
	if o.Clock == nil {
		o.Clock = clock.NewSystem()
	}
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = DefaultLeaseMargin
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Rebuild == nil {
		o.Rebuild = func(context.Context) (throttledriver.Record, error) { return throttledriver.Record{}, nil }
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = defaultMaxBatch
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	s := &Throttle{d: d, clock: o.Clock, margin: o.LeaseMargin, rebuild: o.Rebuild, logger: o.Logger,
		maxBatch: o.MaxBatch, callTimeout: o.CallTimeout}
	s.limits.Store(&[2]throttle.Limits{o.Global, o.Inbox})
	s.gather = newGatherer(d, o.Clock, o.SettleDelay, o.CallTimeout, o.Logger)
	s.spares = newSpares(s)
	return s
}

// Backend names the driver's backend, "postgres" or "redis".
func (s *Throttle) Backend() string { return s.d.Name() }

// SetLimits changes the global limits and the inbox defaults from the next
// admission on.
func (s *Throttle) SetLimits(global, inboxDefault throttle.Limits) {
	mustNotBeNegative(global)
	mustNotBeNegative(inboxDefault)
	s.limits.Store(&[2]throttle.Limits{global, inboxDefault})
	s.spares.drain()
}

// Reserve implements throttle.Throttle.
func (s *Throttle) Reserve(ctx context.Context, r throttle.Request) (throttle.Ticket, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ask := throttledriver.Ask{Inbox: r.Inbox, Lease: max(r.Lease, 0) + s.margin}
	lim := s.limits.Load()
	if r.Inbox != "" {
		ask.Limits = r.Override.Apply(lim[1])
	}
	if r.Cost > 1 {
		// A send of several units (its recipients) is one ask of that many
		// slots, admitted whole or refused, as a block of spares is; it
		// takes no spares, which are one unit each.
		var in *throttle.Limits
		if r.Inbox != "" {
			in = &ask.Limits
		}
		if err := throttle.TooLargeFor(r.Cost, lim[0], in); err != nil {
			return nil, err
		}
		ask.N = r.Cost
	} else if t := s.spares.take(spareKey{inbox: ask.Inbox, limits: ask.Limits, global: lim[0]}, ask.Lease); t != nil {
		return t, nil
	}
	res, err := s.admit(ctx, ask)
	if err != nil {
		return nil, err
	}
	if res.refusal != nil {
		return nil, res.refusal
	}
	return res.ticket, nil
}

// State implements throttle.Throttle. This server's commits and releases that are
// still gathered count as what they are, as they will once sent.
func (s *Throttle) State(ctx context.Context, inbox string, o throttle.Override) (throttle.Snapshot, error) {
	raw, err := s.read(ctx, inbox)
	if err != nil {
		return throttle.Snapshot{}, err
	}
	mine := s.mine(raw.Now, s.clock.Mono())
	lim := s.limits.Load()
	snap := throttle.Snapshot{Global: tally(&raw.Global, raw.Now, lim[0], mine).State(raw.Now, throttle.Global)}
	if inbox != "" {
		snap.HasInbox = true
		snap.Inbox = tally(raw.Inbox[inbox], raw.Now, o.Apply(lim[1]), mine).State(raw.Now, throttle.Inbox)
	}
	return snap, nil
}

func (s *Throttle) read(ctx context.Context, inbox string) (*throttledriver.Raw, error) {
	raw, err := s.d.Read(ctx, inbox)
	if errors.Is(err, throttledriver.ErrStateLost) {
		if err = s.recover(ctx, err); err == nil {
			raw, err = s.d.Read(ctx, inbox)
		}
	}
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return nil, cerr
		}
		return nil, s.unavailable(err)
	}
	s.seen.Store(true)
	return raw, nil
}

func (s *Throttle) unavailable(err error) error {
	var ue *throttle.UnavailableError
	if errors.As(err, &ue) {
		return err
	}
	return &throttle.UnavailableError{Backend: s.d.Name(), Err: err}
}

// recover rebuilds a lost state (lost, the driver's error) from the
// durable send record. Several servers may find it lost at once; the
// backend lets one of them write it, and that one logs it.
func (s *Throttle) recover(ctx context.Context, lost error) error {
	s.spares.drain() // their reservations are gone with the state
	s.recovering.Lock()
	defer s.recovering.Unlock()
	rec, err := s.rebuild(ctx)
	if err != nil {
		return fmt.Errorf("read the send record to rebuild the throttle state: %w", err)
	}
	done, err := s.d.Restore(ctx, rec, false)
	if err != nil || !done {
		return err
	}
	attrs := []any{slog.String("backend", s.d.Name()), slog.Int("sends", len(rec.Sent)),
		slog.Int("in_flight", len(rec.Pending))}
	var part *throttledriver.IncompleteError
	switch {
	case errors.As(lost, &part):
		s.logger.WarnContext(ctx, "throttle state incomplete in the backend (missing "+part.Part+": deleted, "+
			"truncated or evicted); rebuilt from the database's send record before admitting more", attrs...)
	case s.seen.Load():
		s.logger.ErrorContext(ctx, "throttle state vanished from the backend (flushed, or restarted without "+
			"persistence); rebuilt from the database's send record before admitting more", attrs...)
	case len(rec.Sent)+len(rec.Pending) > 0:
		s.logger.WarnContext(ctx, "throttle state not found in the backend (a new one, or one that lost its "+
			"data); rebuilt from the database's send record", attrs...)
	default:
		s.logger.InfoContext(ctx, "throttle state initialized", attrs...)
	}
	s.seen.Store(true)
	return nil
}

// Rebuild replaces the backend's state with the durable send record, as
// when the servers switch to this backend from another: the sends counted
// elsewhere in the last day count here too. Call it only while no other
// server uses the backend.
func (s *Throttle) Rebuild(ctx context.Context) error {
	s.recovering.Lock()
	defer s.recovering.Unlock()
	rec, err := s.rebuild(ctx)
	if err != nil {
		return err
	}
	if _, err := s.d.Restore(ctx, rec, true); err != nil {
		return s.unavailable(err)
	}
	s.logger.InfoContext(ctx, "throttle state rebuilt from the database's send record",
		slog.String("backend", s.d.Name()), slog.Int("sends", len(rec.Sent)), slog.Int("in_flight", len(rec.Pending)))
	return nil
}

// Close implements throttle.Throttle: it waits for the batch under way, sends the
// gathered commits and releases, and stops the background work. New
// admissions are refused as unavailable. A commit it cannot send leaves
// its reservation to be counted at its deadline, as after a crash.
func (s *Throttle) Close(ctx context.Context) error {
	s.closeOnce.Do(func() {
		s.adm.close()
		s.spares.close()
		if err := s.gather.close(ctx); err != nil {
			s.closeErr = s.unavailable(err)
		}
	})
	return s.closeErr
}

// hot reports a refusal, or an admission near a limit, in the last hotFor:
// commits and releases go at once meanwhile.
func (s *Throttle) hot() bool { return int64(s.clock.Mono()) < s.hotUntil.Load() }

func (s *Throttle) heat() {
	s.hotUntil.Store(int64(s.clock.Mono() + hotFor))
	s.spares.drain()
}

// mine is what this server holds that the backend does not know yet, by
// reservation id (see gatherer.mine), and its spares, as given back.
func (s *Throttle) mine(backendNow int64, mono time.Duration) locals {
	return s.spares.mine(s.gather.mine(backendNow, mono))
}

// mustNotBeNegative panics on a negative limit, which configuration
// validation rejects first (as throttle.NewGlobalRateLimiter does).
func mustNotBeNegative(lim throttle.Limits) {
	if lim.PerMinute < 0 || lim.PerHour < 0 {
		panic(fmt.Sprintf("throttle: negative rate limit (per minute %d, per hour %d)", lim.PerMinute, lim.PerHour))
	}
}
