package outbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nornweave/nornweave/providers/notify"
	"github.com/nornweave/nornweave/store"
)

// EventTypes are the events an endpoint may ask for.
var EventTypes = []string{
	"message.scheduled", "message.queued", "message.sent", "message.failed", "message.canceled",
	"message.delivered", "message.bounced", "message.complained", "message.delayed",
	"recipient.suppressed",
}

// RotationOverlap is how long the secret before a rotation keeps signing
// beside the new one.
const RotationOverlap = 24 * time.Hour

// InvalidError refuses an endpoint's URL or events; Field names which.
type InvalidError struct {
	Field string
	Msg   string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Msg }

// EndpointChange is a PATCH: nil fields are left as they are.
type EndpointChange struct {
	URL         *string
	Events      []string // nil: unchanged
	Description *string
	Enabled     *bool
}

// MaxEndpoints bounds the endpoints of a server: each event is a job per
// endpoint that wants it.
const MaxEndpoints = 100

// ErrTooManyEndpoints refuses an endpoint past MaxEndpoints.
var ErrTooManyEndpoints = fmt.Errorf("outbox: at most %d webhook endpoints", MaxEndpoints)

// Create registers an endpoint, with a new secret.
func (w *Webhooks) Create(ctx context.Context, url string, events []string, description string) (*store.WebhookEndpoint, error) {
	events = dedupe(events)
	if err := w.check(ctx, url, events); err != nil {
		return nil, err
	}
	if all, err := w.o.Store.WebhookEndpoints(ctx); err != nil {
		return nil, err
	} else if len(all) >= MaxEndpoints {
		return nil, ErrTooManyEndpoints
	}
	secret, err := notify.NewSecret()
	if err != nil {
		return nil, err
	}
	e := &store.WebhookEndpoint{URL: url, Events: events, Description: description, Enabled: true, Secret: secret}
	return e, w.o.Store.CreateWebhookEndpoint(ctx, e)
}

// Update changes an endpoint. Enabling it clears its failures and the
// reason it was disabled for.
func (w *Webhooks) Update(ctx context.Context, id string, c EndpointChange) (*store.WebhookEndpoint, error) {
	if c.URL != nil || c.Events != nil {
		e, err := w.o.Store.WebhookEndpoint(ctx, id)
		if err != nil {
			return nil, err
		}
		url, events := e.URL, []string(e.Events)
		if c.URL != nil {
			url = *c.URL
		}
		if c.Events != nil {
			c.Events = dedupe(c.Events)
			events = c.Events
		}
		if err := w.check(ctx, url, events); err != nil {
			return nil, err
		}
	}
	return w.o.Store.UpdateWebhookEndpoint(ctx, id, func(e *store.WebhookEndpoint) error {
		if c.URL != nil {
			e.URL = *c.URL
		}
		if c.Events != nil {
			e.Events = c.Events
		}
		if c.Description != nil {
			e.Description = *c.Description
		}
		if c.Enabled != nil {
			if *c.Enabled && !e.Enabled {
				e.DisabledReason, e.FailingSince = nil, nil
			}
			e.Enabled = *c.Enabled
		}
		return nil
	})
}

// Rotate gives an endpoint a new secret; the old one signs beside it for
// RotationOverlap.
func (w *Webhooks) Rotate(ctx context.Context, id string) (*store.WebhookEndpoint, error) {
	secret, err := notify.NewSecret()
	if err != nil {
		return nil, err
	}
	return w.o.Store.UpdateWebhookEndpoint(ctx, id, func(e *store.WebhookEndpoint) error {
		until := time.Now().Add(RotationOverlap).UTC()
		old := e.Secret
		e.Secret, e.PreviousSecret, e.PreviousUntil = secret, &old, &until
		return nil
	})
}

// ErrEndpointDisabled refuses a replay to a disabled endpoint.
var ErrEndpointDisabled = errors.New("outbox: the endpoint is disabled")

// Replay delivers again the event of an endpoint's attempt, under the
// same webhook-id, as a new job with the schedule's attempts.
func (w *Webhooks) Replay(ctx context.Context, endpointID, deliveryID string) error {
	e, err := w.o.Store.WebhookEndpoint(ctx, endpointID)
	if err != nil {
		return err
	}
	if !e.Enabled {
		return ErrEndpointDisabled
	}
	d, err := w.o.Store.WebhookDelivery(ctx, endpointID, deliveryID)
	if err != nil {
		return err
	}
	if w.jobs == nil {
		return errors.New("outbox: not started")
	}
	return w.jobs.Insert(ctx, deliverArgs{EndpointID: endpointID, EventID: d.EventID}, w.insertOpts())
}

// dedupe is events, each once, in their first order.
func dedupe(events []string) []string {
	out := make([]string, 0, len(events))
	for _, e := range events {
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out
}

// check refuses a URL the guard refuses, and events that are none or
// unknown.
func (w *Webhooks) check(ctx context.Context, url string, events []string) error {
	if err := w.o.Guard.CheckURL(ctx, url, w.o.Resolver); err != nil {
		return &InvalidError{Field: "url", Msg: strings.TrimPrefix(err.Error(), "notify: ")}
	}
	if len(events) == 0 {
		return &InvalidError{Field: "events", Msg: "at least one event type, of " + strings.Join(EventTypes, ", ")}
	}
	for _, t := range events {
		if !slices.Contains(EventTypes, t) {
			return &InvalidError{Field: "events", Msg: fmt.Sprintf("unknown event type %q; known: %s", t, strings.Join(EventTypes, ", "))}
		}
	}
	return nil
}
