package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"

	"github.com/nornweave/nornweave/providers/notify"
	"github.com/nornweave/nornweave/store"
)

// deliverArgs is one event for one endpoint: River's job.
type deliverArgs struct {
	EndpointID string `json:"endpoint_id"`
	EventID    string `json:"event_id"`
}

func (deliverArgs) Kind() string { return kindDeliver }

// worker delivers an event to an endpoint, once per River attempt.
type worker struct {
	river.WorkerDefaults[deliverArgs]
	w *Webhooks
}

// jobGrace is what a job's timeout allows past its attempt's: reading the
// endpoint and the event, and recording the attempt.
const jobGrace = 15 * time.Second

func (k *worker) Timeout(*river.Job[deliverArgs]) time.Duration {
	return notify.AttemptTimeout + jobGrace
}

// errAttempt is the error River records for a failed attempt; the
// attempt's own record holds the detail.
var errAttempt = errors.New("outbox: the endpoint did not accept the event")

func (k *worker) Work(ctx context.Context, job *river.Job[deliverArgs]) error {
	w := k.w
	ep, ev, err := w.o.Store.WebhookDeliveryJob(ctx, job.Args.EndpointID, job.Args.EventID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil // the endpoint deleted, or the event pruned: nothing to deliver
	case err != nil:
		return err
	case !ep.Enabled:
		return nil
	}
	now := time.Now()
	signer, err := notify.NewSigner(ep.Secrets(now)...)
	if err != nil {
		return fmt.Errorf("outbox: endpoint %s: %w", ep.ID, err)
	}
	body := []byte(ev.Payload)
	h, err := signer.Headers(ev.ID, now, body)
	if err != nil {
		return err
	}
	res := w.o.Client.Deliver(ctx, ep.URL, h, body)
	d := &store.WebhookDelivery{EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type, Attempt: job.Attempt,
		LatencyMS: res.Latency.Milliseconds()}
	if res.Status != 0 {
		d.StatusCode = &res.Status
	}
	if res.Body != "" {
		d.ResponseBody = &res.Body
	}
	if res.Err != nil {
		msg := res.Err.Error()
		d.Error = &msg
	}
	var (
		next   time.Time
		result error
	)
	switch res.Outcome {
	case notify.Snooze:
		next = time.Now().Add(res.RetryAfter)
		result = river.JobSnooze(res.RetryAfter)
	case notify.Retry:
		if wait, ok := w.o.Schedule.Next(job.Attempt, jitterOf(job.ID, job.Attempt)); ok {
			next = time.Now().Add(wait)
			w.next.Store(job.ID, wait)
			result = errAttempt
		}
	}
	if !next.IsZero() {
		d.NextRetryAt = &next
	}
	disabled, err := w.o.Store.RecordWebhookAttempt(context.WithoutCancel(ctx), d, res.Outcome == notify.Delivered, ep, w.o.Health)
	if err != nil {
		w.next.Delete(job.ID)
		return err
	}
	w.observe(res.Outcome)
	switch res.Outcome {
	case notify.Gone:
		disabled = "gone: the endpoint answered 410"
		err = w.o.Store.DisableWebhookEndpoint(context.WithoutCancel(ctx), ep.ID, disabled)
	case notify.Refused:
		disabled = fmt.Sprintf("refused: %v", res.Err)
		err = w.o.Store.DisableWebhookEndpoint(context.WithoutCancel(ctx), ep.ID, disabled)
	}
	if disabled != "" {
		w.o.Logger.WarnContext(ctx, "webhook endpoint disabled", slog.String("webhook_id", ep.ID),
			slog.String("reason", disabled))
		if w.o.Observer != nil {
			w.o.Observer.WebhookAttempt("disabled")
		}
		w.next.Delete(job.ID)
		return err
	}
	if res.Outcome == notify.Retry && next.IsZero() {
		w.o.Logger.WarnContext(ctx, "webhook event given up after its last attempt", slog.String("webhook_id", ep.ID),
			slog.String("event_id", ev.ID), slog.Int("attempts", job.Attempt))
		return river.JobCancel(errAttempt)
	}
	return result
}

// NextRetry is the schedule's wait after the attempt, as Work logged it,
// from now: the attempt's record took its time since, and a time already
// past would make River fall back to its own policy. The log's
// next_retry_at is thus never after the retry: it comes no earlier.
func (k *worker) NextRetry(job *river.Job[deliverArgs]) time.Time {
	wait, ok := k.w.next.LoadAndDelete(job.ID)
	if !ok {
		wait, _ = k.w.o.Schedule.Next(job.Attempt, jitterOf(job.ID, job.Attempt))
	}
	return time.Now().Add(max(wait.(time.Duration), time.Millisecond))
}

// jitterOf is the randomness of a job's attempt's wait.
func jitterOf(id int64, attempt int) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(id), uint64(attempt)))
}

func (w *Webhooks) observe(o notify.Outcome) {
	if w.o.Observer == nil {
		return
	}
	w.o.Observer.WebhookAttempt(OutcomeName(o))
}

// OutcomeName names an attempt's outcome in metrics.
func OutcomeName(o notify.Outcome) string {
	switch o {
	case notify.Delivered:
		return "delivered"
	case notify.Snooze:
		return "snoozed"
	case notify.Gone:
		return "gone"
	case notify.Refused:
		return "refused"
	}
	return "failed"
}
