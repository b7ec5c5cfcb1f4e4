package seslimits

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/providers"
)

// DefaultInterval is how often a Refresher reads the quota again. SES
// raises a quota as an account's sending grows, a few times a day at most;
// an hour follows that closely for one call an hour.
const DefaultInterval = time.Hour

// Reader reads an SES account's sending quota; *providers.SES is one.
type Reader interface {
	Quota(ctx context.Context) (providers.SESQuota, error)
}

// Options configure a Refresher. Reader and Apply are required; zero
// values of the rest take the defaults.
type Options struct {
	Reader Reader
	// Margin is the share of SES's quota the limits are (see CheckMargin);
	// 0 is DefaultMargin.
	Margin float64
	// Interval is the time between reads; 0 is DefaultInterval.
	Interval time.Duration
	// Clock schedules the reads; nil is the system clock. A test's fake
	// clock makes the hourly read happen when it advances an hour.
	Clock clock.Clock
	// Apply sets the throttle's global per-second and per-day limits.
	Apply func(perSecond, perDay int)
	// Logger takes the changes (INFO) and the failed reads (WARN); nil
	// discards them.
	Logger *slog.Logger
}

// Refresher keeps the throttle's global per-second and per-day limits at
// SES's quota times the margin (Limits). Start reads the quota and applies
// it; then, every Interval, it reads it again and applies it if the limits
// changed, logging the old and new ones at INFO. A read that fails is
// logged at WARN and the last limits stay: they were SES's an interval
// ago, which is a better guess than none, and SES lowers a quota rarely.
//
// Start and Stop are safe for concurrent use. Apply is called by one
// goroutine at a time, never by two at once, and never after Stop has
// returned nil.
type Refresher struct {
	o Options
	// ctx is the reads' context; Stop cancels it so that a read under way
	// does not hold Stop for the provider's whole timeout.
	ctx    context.Context
	cancel context.CancelFunc

	mu                sync.Mutex
	started, stopped  bool
	timer             clock.Timer // the next read's, between reads
	perSecond, perDay int         // applied last
	// running counts the reads scheduled or under way, so that Stop
	// returns only once none can call Apply any more.
	running sync.WaitGroup
}

// New returns a Refresher that does nothing until Start.
func New(o Options) (*Refresher, error) {
	if o.Margin == 0 {
		o.Margin = DefaultMargin
	}
	if err := CheckMargin(o.Margin); err != nil {
		return nil, fmt.Errorf("seslimits: Margin: %w", err)
	}
	switch {
	case o.Reader == nil || o.Apply == nil:
		return nil, errors.New("seslimits: Reader and Apply are required")
	case o.Interval < 0:
		return nil, fmt.Errorf("seslimits: Interval %s is negative", o.Interval)
	case o.Interval == 0:
		o.Interval = DefaultInterval
	}
	if o.Clock == nil {
		o.Clock = clock.NewSystem()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Refresher{o: o}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	return r, nil
}

// Start reads the quota, applies its limits and schedules the next read.
// The first read is made before Start returns, so that a server starts
// with SES's limits rather than its configuration's; if it fails, Start
// returns the error and schedules nothing. ctx bounds the first read only.
func (r *Refresher) Start(ctx context.Context) error {
	r.mu.Lock()
	if r.started || r.stopped {
		r.mu.Unlock()
		return errors.New("seslimits: started twice, or after Stop")
	}
	r.started = true
	r.running.Add(1)
	r.mu.Unlock()
	defer r.running.Done()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(r.ctx, cancel)()
	q, err := r.o.Reader.Quota(ctx)
	if err != nil {
		return fmt.Errorf("seslimits: read the SES send quota at start: %w", err)
	}
	perSecond, perDay := Limits(q, r.o.Margin)
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return errors.New("seslimits: stopped during Start")
	}
	r.perSecond, r.perDay = perSecond, perDay
	r.mu.Unlock()

	r.o.Apply(perSecond, perDay)
	r.o.Logger.Info("ses limits applied", append(quotaAttrs(q, r.o.Margin),
		slog.Int("per_second", perSecond), slog.Int("per_day", perDay))...)

	r.mu.Lock()
	if !r.stopped {
		r.armLocked()
	}
	r.mu.Unlock()
	return nil
}

// armLocked schedules the next read, an Interval from now.
func (r *Refresher) armLocked() {
	r.running.Add(1)
	r.timer = r.o.Clock.AfterFunc(r.o.Interval, r.tick)
}

// tick is the timer's call: read, apply a change, schedule the next.
func (r *Refresher) tick() {
	defer r.running.Done()
	r.mu.Lock()
	r.timer = nil
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()

	q, err := r.o.Reader.Quota(r.ctx)
	r.mu.Lock()
	if r.stopped {
		// A read Stop cut short is no news worth a warning.
		r.mu.Unlock()
		return
	}
	was := [2]int{r.perSecond, r.perDay}
	now := was
	if err == nil {
		now[0], now[1] = Limits(q, r.o.Margin)
		r.perSecond, r.perDay = now[0], now[1]
	}
	r.mu.Unlock()

	switch {
	case err != nil:
		r.o.Logger.Warn("ses limits not refreshed; keeping the last", slog.Any("error", err),
			slog.Int("per_second", was[0]), slog.Int("per_day", was[1]),
			slog.Int64("retry_in_s", int64(r.o.Interval/time.Second)))
	case now != was:
		r.o.Apply(now[0], now[1])
		r.o.Logger.Info("ses limits changed", append(quotaAttrs(q, r.o.Margin),
			slog.Int("per_second_was", was[0]), slog.Int("per_second", now[0]),
			slog.Int("per_day_was", was[1]), slog.Int("per_day", now[1]))...)
	}

	r.mu.Lock()
	if !r.stopped {
		r.armLocked()
	}
	r.mu.Unlock()
}

// Stop cancels the next read and a read under way, and waits until no
// read can call Apply any more, or until ctx ends (ctx.Err()). Safe to
// call twice, and before Start.
func (r *Refresher) Stop(ctx context.Context) error {
	r.mu.Lock()
	r.stopped = true
	if r.timer != nil && r.timer.Stop() {
		r.running.Done() // its call will never run
	}
	r.timer = nil
	r.mu.Unlock()
	r.cancel()

	done := make(chan struct{})
	go func() {
		r.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// quotaAttrs are SES's numbers and the margin, for the log lines.
func quotaAttrs(q providers.SESQuota, margin float64) []any {
	return []any{slog.Float64("ses_max_send_rate", q.MaxSendRate), slog.Float64("ses_max_24_hour_send", q.Max24HourSend),
		slog.Float64("ses_sent_last_24_hours", q.SentLast24Hours), slog.Float64("margin", margin)}
}
