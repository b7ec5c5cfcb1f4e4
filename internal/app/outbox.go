package app

import (
	"context"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers/notify"
	"github.com/nornweave/nornweave/skuld/hold"
	"github.com/nornweave/nornweave/skuld/outbox"
	"github.com/nornweave/nornweave/store"
)

// WithWebhookClient makes o the options of the client that delivers
// webhooks out (its guard comes from the configuration): a test counts
// the addresses it dials.
func WithWebhookClient(o notify.Options) Option {
	return func(a *App) { a.hookClient = &o }
}

// WithWebhookResolver makes r the resolver a webhook URL is checked with
// when it is registered: a test names a host that resolves to loopback.
func WithWebhookResolver(r notify.Resolver) Option {
	return func(a *App) { a.hookResolver = r }
}

// webhooksOut builds the delivery of events to applications' endpoints,
// and the Queue extension that runs it.
func (a *App) webhooksOut(cfg config.Config, st *store.Store) (*outbox.Webhooks, hold.Extension, error) {
	waits, err := cfg.WebhookRetryWaits()
	if err != nil {
		return nil, hold.Extension{}, err
	}
	schedule := notify.DefaultSchedule
	if waits != nil {
		schedule = append(notify.Schedule{0}, waits...)
	}
	guard := notify.Guard{AllowHTTP: cfg.WebhookAllowHTTP, AllowPrivate: cfg.WebhookAllowPrivateTargets}
	co := notify.Options{}
	if a.hookClient != nil {
		co = *a.hookClient
	}
	co.Guard = guard
	w := outbox.New(outbox.Options{Store: st, Client: notify.NewClient(co), Guard: guard, Resolver: a.hookResolver,
		Render: api.EventData, Schedule: schedule, Logger: a.logger, Observer: a.metrics,
		PollInterval: webhookPoll(cfg)})
	queue, workers, register := w.Extension()
	return w, hold.Extension{Queue: queue, Workers: workers, Register: register, PollInterval: webhookPoll(cfg)}, nil
}

// webhookPoll is how often an idle server looks at the outbox and for
// delivery jobs: HELD_POLL_INTERVAL, but not under a quarter of a second.
// At held mail's 50 ms, the relay's transaction and the webhook queue's
// fetch, twenty times a second each, more than doubled an idle server's
// CPU (-race, SQLite: 2.9-3.0 s per 10 s before issue 30, 6.4-6.7 s
// with them); an event within a quarter of a second is soon enough. A
// backlog is fetched as workers free, not by the poll.
func webhookPoll(cfg config.Config) time.Duration {
	return max(cfg.HeldPollInterval, minWebhookPoll)
}

const minWebhookPoll = 250 * time.Millisecond

// oldestUndelivered is the metric's age of the oldest event not yet
// delivered.
func (a *App) oldestUndelivered(ctx context.Context) (time.Duration, error) {
	at, ok, err := a.hooksOut.Oldest(ctx)
	if err != nil || !ok {
		return 0, err
	}
	return time.Since(at), nil
}
