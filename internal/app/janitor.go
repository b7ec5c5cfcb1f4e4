package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/metrics"
	"github.com/nornweave/nornweave/skuld/activity"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// The janitor's periods. It ticks every janitorTick and does on each tick
// what is due then.
const (
	// janitorTick is how often held mail past QUEUE_MAX_AGE is failed:
	// the README promises expiry within about a second of the deadline,
	// whatever the message's job is doing. One indexed statement.
	janitorTick = time.Second
	// resolveTicks: the sends of a server that died are resolved every
	// 5 s, so that mail it was still waiting to hand over goes again soon.
	resolveTicks = 5
	// pruneTicks: pruning, every 5 minutes.
	pruneTicks = 300
)

// sendLogKeep is how long a counted send is kept in the throttle's log:
// longer than the day window plus its bucket, which a restart reads back.
const sendLogKeep = throttle.Longest + time.Minute

// expiredGrace is how long past its deadline a send in flight is left to
// its server before the janitor resolves it: the servers' wall clocks may
// disagree a little.
const expiredGrace = 2 * time.Minute

// janitor adds the dashboard's counts to the database (every tick, and
// when it stops), fails held mail past its QUEUE_MAX_AGE, resolves the sends of
// servers that died, warns of a bounce or complaint rate that endangers
// the sender, and prunes what nothing can use any more: sends older
// than every throttle window, idempotency keys past their 24 h,
// webhook events and their delivery log past 30 days, the dashboard's
// logouts of sessions expired, and its counts past what it charts. It runs
// at start and then on the app's clock, every janitorTick, until Stop; a
// test's fake clock drives it.
type janitor struct {
	store  *store.Store
	clock  clock.Clock
	logger *slog.Logger
	maxAge time.Duration
	lane   store.LaneJob
	counts *activity.Counter

	// warnedAt is when the last reputation warning was logged.
	warnedAt time.Time

	mu      sync.Mutex
	timer   clock.Timer
	ticks   int
	stopped bool
	running sync.WaitGroup
}

func startJanitor(st *store.Store, c clock.Clock, logger *slog.Logger, maxAge time.Duration, lane store.LaneJob,
	counts *activity.Counter) *janitor {
	j := &janitor{store: st, clock: c, logger: logger, maxAge: maxAge, lane: lane, counts: counts}
	j.mu.Lock()
	j.timer = c.AfterFunc(0, j.tick)
	j.mu.Unlock()
	return j
}

// tick does what is due and schedules the next tick.
func (j *janitor) tick() {
	j.mu.Lock()
	if j.stopped {
		j.mu.Unlock()
		return
	}
	j.running.Add(1)
	n := j.ticks
	j.ticks++
	j.mu.Unlock()
	defer j.running.Done()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := j.clock.Now()
	j.flush(ctx)
	j.expire(ctx, now)
	if n%resolveTicks == 0 {
		j.resolve(ctx, now)
	}
	if n%pruneTicks == 0 {
		j.prune(ctx, now, n > 0)
		j.reputation(ctx, now)
	}

	j.mu.Lock()
	if !j.stopped {
		j.timer = j.clock.AfterFunc(janitorTick, j.tick)
	}
	j.mu.Unlock()
}

// flush adds the dashboard's counts so far to the database; those it
// could not add wait for the next tick.
func (j *janitor) flush(ctx context.Context) {
	if err := j.counts.Flush(ctx); err != nil {
		j.logger.Error("add the dashboard's counts", slog.Any("error", err))
	}
}

// expire fails the held messages due more than maxAge ago, even those
// whose job sleeps (a lane waiting for its window).
func (j *janitor) expire(ctx context.Context, now time.Time) {
	if n, err := j.store.ExpireHeld(ctx, now.Add(-j.maxAge)); err != nil {
		j.logger.Error("expire held messages", slog.Any("error", err))
	} else if n > 0 {
		j.logger.Warn("held messages expired: not sent within QUEUE_MAX_AGE of becoming due", slog.Int64("messages", n))
	}
}

// resolve settles the sends of a server that died, past their deadline:
// safe on every server, since a live one settles its sends by their
// deadline. Those still waiting for the provider are given back.
func (j *janitor) resolve(ctx context.Context, now time.Time) {
	if n, err := j.store.ResolveExpiredSends(ctx, now, now.Add(-expiredGrace), j.lane); err != nil {
		j.logger.Error("resolve expired sends", slog.Any("error", err))
	} else if n > 0 {
		j.logger.Warn("sends of a stopped server resolved: given back if they were waiting, else counted and failed, delivery unknown",
			slog.Int64("sends", n))
	}
}

// prune deletes what nothing can use any more; the webhook log and the
// dashboard's logouts, never urgent (an expired cookie is refused for its
// expiry), not at start (started), when on SQLite a DELETE would hold the
// one writer while the server begins to answer.
func (j *janitor) prune(ctx context.Context, now time.Time, started bool) {
	if _, err := j.store.PruneSendLog(ctx, now.Add(-sendLogKeep)); err != nil {
		j.logger.Error("prune send log", slog.Any("error", err))
	}
	if _, err := j.store.PruneIdempotencyKeys(ctx, now.Add(-api.KeyTTL)); err != nil {
		j.logger.Error("prune idempotency keys", slog.Any("error", err))
	}
	if !started {
		return
	}
	if _, err := j.store.PruneWebhookEvents(ctx, now.Add(-webhookLogKeep)); err != nil {
		j.logger.Error("prune webhook events", slog.Any("error", err))
	}
	if _, err := j.store.PruneAdminLogouts(ctx, now); err != nil {
		j.logger.Error("prune admin logouts", slog.Any("error", err))
	}
	for width, keep := range countsKeep {
		if _, err := j.store.PruneSendCounts(ctx, width, now.Add(-keep)); err != nil {
			j.logger.Error("prune the dashboard's counts", slog.Any("error", err))
		}
	}
}

// countsKeep is how long the dashboard's counts are kept, by width: a day
// of minutes for the last hour's chart, 30 days of hours for the week's.
// At most about 1,440 and 720 buckets of seven kinds, whatever the traffic.
var countsKeep = map[string]time.Duration{store.WidthMinute: 24 * time.Hour, store.WidthHour: 30 * 24 * time.Hour}

// webhookLogKeep is how long an event and its delivery log are kept for
// GET /v1/webhooks/{id}/deliveries and replay: well past the retry
// schedule's day and a quarter.
const webhookLogKeep = 30 * 24 * time.Hour

// The thresholds past which the janitor warns of the sender's reputation:
// where SES puts an account under review (a 5 % bounce rate, a 0.1 %
// complaint rate), once at least minReputationSample messages were sent in
// the window, below which one bounce makes a rate.
const (
	maxBounceRate        = 0.05
	maxComplaintRate     = 0.001
	minReputationSample  = 100
	reputationWarnPeriod = time.Hour
)

// reputation warns, at most once an hour while it lasts, when the bounce
// or complaint rate of the last 24 hours is past what gets a provider
// account reviewed.
func (j *janitor) reputation(ctx context.Context, now time.Time) {
	sent, hard, complaints, err := j.store.Reputation(ctx, now.Add(-metrics.ReputationWindow))
	if err != nil {
		j.logger.Error("read bounce and complaint rates", slog.Any("error", err))
		return
	}
	br, cr := metrics.Rate(hard, sent), metrics.Rate(complaints, sent)
	if sent < minReputationSample || br <= maxBounceRate && cr <= maxComplaintRate {
		return
	}
	if !j.warnedAt.IsZero() && now.Sub(j.warnedAt) < reputationWarnPeriod {
		return
	}
	j.warnedAt = now
	j.logger.Warn("bounce or complaint rate over what gets a provider account reviewed (5 % bounces, 0.1 % complaints); "+
		"check the list you send to (GET /v1/suppressions)",
		slog.Int64("sent_24h", sent), slog.Float64("bounce_rate", br), slog.Float64("complaint_rate", cr))
}

// Stop ends the janitor, waits for a tick under way, and adds the last
// counts. Safe to call twice.
func (j *janitor) Stop() {
	j.mu.Lock()
	j.stopped = true
	if j.timer != nil {
		j.timer.Stop()
	}
	j.mu.Unlock()
	j.running.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	j.flush(ctx)
}
