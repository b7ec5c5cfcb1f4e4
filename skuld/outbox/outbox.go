// Package outbox delivers NornWeave's events to the endpoints applications
// register (webhooks out): at least once, signed by the Standard Webhooks
// spec (providers/notify), retried on a schedule the user can read, and
// written down attempt by attempt.
//
// An event is born in the database, by a trigger, in the transaction that
// changes what it tells of (a message's status, a provider's delivery
// event, a suppression): migration 0014's webhook_outbox. The Relay takes
// those rows in order and, in one transaction, stores each as the body it
// will be delivered as (webhook_events) and writes one River job per
// endpoint that wants it, and deletes it. So a crash can neither lose an
// event (the change committed, so did its row) nor invent one (rolled back
// together), and each is relayed once. River then runs the jobs on the
// held-mail queue's client (skuld/hold, as an Extension), in a queue of
// their own, and its retry policy is the schedule's.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"github.com/nornweave/nornweave/providers/notify"
	"github.com/nornweave/nornweave/store"
)

// Store is what the package needs of persistence.
type Store interface {
	RelayOutbox(ctx context.Context, limit int, plan store.OutboxPlan) (int, error)
	OldestOutboxEvent(ctx context.Context) (time.Time, bool, error)
	WebhookEndpoint(ctx context.Context, id string) (*store.WebhookEndpoint, error)
	WebhookEndpoints(ctx context.Context) ([]store.WebhookEndpoint, error)
	WebhookDeliveryJob(ctx context.Context, endpointID, eventID string) (*store.WebhookEndpoint, *store.WebhookEvent, error)
	WebhookDelivery(ctx context.Context, endpointID, id string) (*store.WebhookDelivery, error)
	RecordWebhookAttempt(ctx context.Context, d *store.WebhookDelivery, ok bool, ep *store.WebhookEndpoint, h store.WebhookHealth) (string, error)
	DisableWebhookEndpoint(ctx context.Context, id, reason string) error
	CreateWebhookEndpoint(ctx context.Context, e *store.WebhookEndpoint) error
	UpdateWebhookEndpoint(ctx context.Context, id string, change func(e *store.WebhookEndpoint) error) (*store.WebhookEndpoint, error)
}

// Jobs writes delivery jobs (hold.Queue).
type Jobs interface {
	InsertTx(ctx context.Context, tx *sql.Tx, jobs []river.InsertManyParams) error
	Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error
	OldestJob(ctx context.Context, kinds ...string) (time.Time, bool, error)
}

// Observer is told each attempt's outcome and each endpoint disabled
// (internal/metrics).
type Observer interface {
	WebhookAttempt(outcome string)
}

// Options configure Webhooks.
type Options struct {
	Store  Store
	Client *notify.Client
	// Guard checks a URL when an endpoint is registered or changed; the
	// Client checks every address it connects to.
	Guard    notify.Guard
	Resolver notify.Resolver // nil: the system's
	// Render is a message event's data: the message as GET shows it,
	// without bodies, and the recipient and detail of a per-recipient
	// event (nil when none).
	Render func(m *store.Message, recipient, detail *string) any
	// Schedule is when an event is tried again (nil: notify.DefaultSchedule).
	Schedule notify.Schedule
	// Health is when a failing endpoint is disabled (zero: 100 attempts
	// in a row over at least an hour, or 5 days without a success).
	Health store.WebhookHealth
	// PollInterval is how often the relay looks at the outbox (default
	// 50 ms).
	PollInterval time.Duration
	// Workers is how many deliveries run at once on a server (default 100).
	Workers  int
	Logger   *slog.Logger
	Observer Observer
}

// Webhooks relays events and delivers them. Build it before the Queue
// (its Extension registers the worker), and Start it with the Queue.
// It is safe for concurrent use.
type Webhooks struct {
	o    Options
	jobs Jobs

	// next holds the wait each failed attempt logged, for River's
	// NextRetry of the same job, which runs right after its Work.
	next sync.Map // job id → time.Duration

	mu      sync.Mutex
	stop    chan struct{}
	done    chan struct{}
	started bool
	stopped bool
}

// Job kind and queue, as River stores them: never change them.
const (
	kindDeliver = "nornweave_webhook"
	queueName   = "webhooks"
)

// relayBatch is how many outbox rows one relay transaction takes.
const relayBatch = 500

// New returns Webhooks configured by o.
func New(o Options) *Webhooks {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Schedule == nil {
		o.Schedule = notify.DefaultSchedule
	}
	if o.Health == (store.WebhookHealth{}) {
		o.Health = store.WebhookHealth{MaxFailures: 100, MinFailing: time.Hour, MaxFailing: 5 * 24 * time.Hour}
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	if o.Resolver == nil {
		o.Resolver = net.DefaultResolver
	}
	if o.Workers <= 0 {
		o.Workers = 100
	}
	return &Webhooks{o: o}
}

// Extension is what the Queue runs for w: its worker, in its own queue.
func (w *Webhooks) Extension() (queue string, workers int, register func(*river.Workers)) {
	return queueName, w.o.Workers, func(ws *river.Workers) { river.AddWorker(ws, &worker{w: w}) }
}

// Start begins relaying the outbox into jobs.
func (w *Webhooks) Start(jobs Jobs) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.stopped {
		return errors.New("outbox: started twice, or after Stop")
	}
	w.jobs, w.started = jobs, true
	w.stop, w.done = make(chan struct{}), make(chan struct{})
	go w.relayLoop()
	return nil
}

// Stop stops the relay, letting a relay transaction in progress finish,
// or until ctx ends. What is left in the outbox waits for the next start.
// It is safe to call more than once.
func (w *Webhooks) Stop(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.started || w.stopped {
		w.stopped = true
		return nil
	}
	w.stopped = true
	close(w.stop)
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (w *Webhooks) relayLoop() {
	defer close(w.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
		}
		n, err := w.Relay(ctx)
		wait := w.o.PollInterval
		switch {
		case err != nil:
			w.o.Logger.Warn("webhook events not relayed; trying again", slog.Any("error", err))
			wait = time.Second
		case n == relayBatch:
			wait = 0 // more waiting
		}
		t.Reset(wait)
	}
}

// Relay moves one batch of the outbox into events and jobs, and returns
// how many events it took.
func (w *Webhooks) Relay(ctx context.Context) (int, error) {
	return w.o.Store.RelayOutbox(ctx, relayBatch, w.plan)
}

// plan makes the outbox's events into stored events, and their jobs.
func (w *Webhooks) plan(evs []store.OutboxEvent, msgs map[string]*store.Message, eps []store.WebhookEndpoint) ([]store.WebhookEvent, store.JobTx, error) {
	var (
		stored []store.WebhookEvent
		jobs   []river.InsertManyParams
	)
	for _, e := range evs {
		var want []string
		for i := range eps {
			if eps[i].Wants(e.Type) {
				want = append(want, eps[i].ID)
			}
		}
		if len(want) == 0 {
			continue
		}
		body, err := w.payload(e, msgs)
		if err != nil {
			return nil, nil, err
		}
		ev := store.WebhookEvent{ID: "evt_" + uuid.NewString(), Type: e.Type, Payload: string(body), CreatedAt: e.CreatedAt}
		stored = append(stored, ev)
		for _, id := range want {
			jobs = append(jobs, river.InsertManyParams{Args: deliverArgs{EndpointID: id, EventID: ev.ID},
				InsertOpts: w.insertOpts()})
		}
	}
	if len(jobs) == 0 {
		return stored, nil, nil
	}
	return stored, func(ctx context.Context, tx *sql.Tx) error { return w.jobs.InsertTx(ctx, tx, jobs) }, nil
}

func (w *Webhooks) insertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: queueName, MaxAttempts: len(w.o.Schedule)}
}

// event is an event's body, as the spec lays it out.
type event struct {
	Type      string    `json:"type"`
	Timestamp time.Time `json:"timestamp"`
	Data      any       `json:"data"`
}

// gone is the data of an event whose message no longer exists (deleted
// with its inbox before the event was relayed), or of a suppression added
// by hand.
type gone struct {
	ID        *string `json:"id,omitempty"`
	Status    *string `json:"status,omitempty"`
	Recipient *string `json:"recipient,omitempty"`
	Detail    *string `json:"detail,omitempty"`
}

func (w *Webhooks) payload(e store.OutboxEvent, msgs map[string]*store.Message) ([]byte, error) {
	var data any = gone{ID: e.MessageID, Status: e.Status, Recipient: e.Recipient, Detail: e.Detail}
	if e.MessageID != nil {
		if m, ok := msgs[*e.MessageID]; ok {
			view := *m
			if e.Status != nil {
				// The message as it was when the event happened.
				view.Status, view.Error = *e.Status, e.Detail
			}
			data = w.o.Render(&view, e.Recipient, e.Detail)
		}
	}
	b, err := json.Marshal(event{Type: e.Type, Timestamp: e.CreatedAt.UTC(), Data: data})
	if err != nil {
		return nil, fmt.Errorf("outbox: event %d: %w", e.Seq, err)
	}
	return b, nil
}

// Oldest is when the oldest event not yet delivered everywhere happened:
// in the outbox, or waiting in a delivery job.
func (w *Webhooks) Oldest(ctx context.Context) (time.Time, bool, error) {
	a, okA, err := w.o.Store.OldestOutboxEvent(ctx)
	if err != nil {
		return time.Time{}, false, err
	}
	if w.jobs == nil {
		return a, okA, nil
	}
	b, okB, err := w.jobs.OldestJob(ctx, kindDeliver)
	switch {
	case err != nil:
		return time.Time{}, false, err
	case okA && (!okB || a.Before(b)):
		return a, true, nil
	}
	return b, okB, nil
}
