package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/store"
)

// janitorEvery is how often the janitor prunes.
const janitorEvery = 5 * time.Minute

// sendLogKeep is how long a counted send is kept in the throttle's log:
// longer than the hour window plus its bucket, which a restart reads back.
const sendLogKeep = 62 * time.Minute

// expiredGrace is how long past its deadline a send in flight is left to
// its server before the janitor resolves it: the servers' wall clocks may
// disagree a little.
const expiredGrace = 2 * time.Minute

// janitor prunes what nothing can use any more: sends older than every
// throttle window and idempotency keys past their 24 h. It runs once at
// start and then every janitorEvery until Stop.
type janitor struct {
	store  *store.Store
	clock  clock.Clock
	logger *slog.Logger
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
}

func startJanitor(st *store.Store, c clock.Clock, logger *slog.Logger) *janitor {
	j := &janitor{store: st, clock: c, logger: logger, stop: make(chan struct{}), done: make(chan struct{})}
	go j.run()
	return j
}

func (j *janitor) run() {
	defer close(j.done)
	t := time.NewTicker(janitorEvery)
	defer t.Stop()
	for {
		j.prune()
		select {
		case <-t.C:
		case <-j.stop:
			return
		}
	}
}

func (j *janitor) prune() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	now := j.clock.Now()
	if _, err := j.store.PruneSendLog(ctx, now.Add(-sendLogKeep)); err != nil {
		j.logger.Error("prune send log", slog.Any("error", err))
	}
	// Sends of a server that died, past their deadline: safe on every
	// server, since a live one settles its sends by their deadline.
	if n, err := j.store.ResolveExpiredSends(ctx, now.Add(-expiredGrace)); err != nil {
		j.logger.Error("resolve expired sends", slog.Any("error", err))
	} else if n > 0 {
		j.logger.Warn("sends of a stopped server counted and marked failed", slog.Int64("messages", n))
	}
	if _, err := j.store.PruneIdempotencyKeys(ctx, now.Add(-api.KeyTTL)); err != nil {
		j.logger.Error("prune idempotency keys", slog.Any("error", err))
	}
}

// Stop ends the janitor and waits for a prune under way. Safe to call twice.
func (j *janitor) Stop() {
	j.once.Do(func() { close(j.stop) })
	<-j.done
}
