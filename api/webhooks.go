package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/providers/webhook"
	"github.com/nornweave/nornweave/skuld/events"
)

// Webhooks are the providers' event webhooks (POST /webhooks/{provider}),
// each authenticated by its provider's signature, never by the API key. A
// provider whose secret is not configured has a nil verifier: its route
// answers 404 webhook_not_configured.
type Webhooks struct {
	Mailgun  *webhook.Mailgun
	SendGrid *webhook.SendGrid
	Resend   *webhook.Resend
	SES      *webhook.SNS
	// Events records what the verified events say.
	Events interface {
		Record(ctx context.Context, provider string, evs []webhook.Event) (events.Result, error)
	}
}

// WebhookMaxBody is the most a provider may post at once: a SendGrid batch
// of about 128 events is a few hundred KiB.
const WebhookMaxBody = 1 << 20

// webhookProviders are the providers that post events, by route name.
var webhookProviders = []string{"mailgun", "sendgrid", "resend", "ses"}

// receiveWebhook is POST /webhooks/{provider}: the raw body is read (at
// most WebhookMaxBody) and verified before anything of it is parsed or
// stored. Answers: 200 for events stored, seen before, or about messages
// we do not know (the provider must not retry them); 401
// invalid_signature, nothing stored; 404 webhook_not_configured; 413.
func (a *API) receiveWebhook(c echo.Context) error {
	ctx, provider := c.Request().Context(), c.Param("provider")
	if !slices.Contains(webhookProviders, provider) {
		return notFound("Not Found")
	}
	if !a.Webhooks.Configured(provider) {
		return a.refuseWebhook(provider, "not_configured", newError(http.StatusNotFound, "webhook_not_configured",
			fmt.Sprintf("The %s webhook is not configured on this server (%s is not set)", provider, WebhookSecret(provider))))
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, WebhookMaxBody+1))
	if err != nil {
		return ReadError(err)
	}
	if len(body) > WebhookMaxBody {
		return a.refuseWebhook(provider, "too_large", newError(http.StatusRequestEntityTooLarge, "payload_too_large",
			fmt.Sprintf("Webhook body too large: the limit is %d MiB", WebhookMaxBody>>20)))
	}
	evs, err := a.verifyWebhook(ctx, provider, c.Request().Header, body)
	var se *webhook.SignatureError
	switch {
	case errors.As(err, &se):
		a.logger.InfoContext(ctx, "webhook refused", slog.String("provider", provider), slog.String("reason", se.Reason))
		return a.refuseWebhook(provider, "invalid_signature", newError(http.StatusUnauthorized, "invalid_signature",
			"Invalid webhook signature: "+se.Reason))
	case errors.Is(err, webhook.ErrTooManyTokens):
		c.Response().Header().Set("Retry-After", "5")
		return a.refuseWebhook(provider, "busy", &apiError{Status: http.StatusServiceUnavailable, Code: "webhook_busy", Detail: err.Error()})
	case errors.Is(err, errWebhookPayload):
		a.logger.WarnContext(ctx, "signed webhook payload not understood", slog.String("provider", provider), slog.Any("error", err))
		return a.refuseWebhook(provider, "invalid_payload", newError(http.StatusBadRequest, "invalid_payload", err.Error()))
	case err != nil:
		return err
	}
	res, err := a.Webhooks.Events.Record(ctx, provider, evs)
	if err != nil {
		if provider == "mailgun" {
			a.Webhooks.Mailgun.Forget(body) // its retry is not a replay
		}
		return err
	}
	if res.Unknown > 0 {
		a.logger.InfoContext(ctx, "webhook events about messages we do not know, ignored",
			slog.String("provider", provider), slog.Int("events", res.Unknown))
	}
	return c.JSON(http.StatusOK, webhookAnswer{Stored: res.Stored, Seen: res.Seen, Ignored: res.Unknown})
}

// webhookAnswer tells the provider (and whoever replays a payload by hand)
// what became of its events.
type webhookAnswer struct {
	Stored  int `json:"stored"`
	Seen    int `json:"seen"`
	Ignored int `json:"ignored"`
}

// WebhookSecret names the setting that configures provider's webhook.
func WebhookSecret(provider string) string {
	return map[string]string{
		"mailgun": "MAILGUN_WEBHOOK_SIGNING_KEY", "sendgrid": "SENDGRID_WEBHOOK_PUBLIC_KEY",
		"resend": "RESEND_WEBHOOK_SECRET", "ses": "SES_SNS_TOPIC_ARNS",
	}[provider]
}

// errWebhookPayload is a signed body that is not the provider's shape.
var errWebhookPayload = errors.New("webhook payload")

// Configured reports whether provider's webhook is: its secret is set.
func (w *Webhooks) Configured(provider string) bool {
	if w == nil {
		return false
	}
	switch provider {
	case "mailgun":
		return w.Mailgun != nil
	case "sendgrid":
		return w.SendGrid != nil
	case "resend":
		return w.Resend != nil
	case "ses":
		return w.SES != nil
	}
	return false
}

// verifyWebhook checks body's signature by provider's verifier, then
// parses its events. An SNS subscription's confirmation, for an allowed
// topic, is confirmed here and has no events.
func (a *API) verifyWebhook(ctx context.Context, provider string, h http.Header, body []byte) ([]webhook.Event, error) {
	w := a.Webhooks
	var (
		evs []webhook.Event
		err error
	)
	switch provider {
	case "mailgun":
		if err = w.Mailgun.Verify(body); err == nil {
			evs, err = webhook.ParseMailgun(body)
		}
	case "sendgrid":
		if err = w.SendGrid.Verify(h, body); err == nil {
			evs, err = webhook.ParseSendGrid(body)
		}
	case "resend":
		if err = w.Resend.Verify(h, body); err == nil {
			evs, err = webhook.ParseResend(h.Get("svix-id"), body)
		}
	case "ses":
		m, verr := w.SES.Verify(ctx, body)
		if verr != nil {
			return nil, verr
		}
		switch m.Type {
		case webhook.SNSSubscriptionConfirm:
			if err := w.SES.Confirm(ctx, m); err != nil {
				return nil, fmt.Errorf("confirm the SNS subscription to %s: %w", m.TopicArn, err)
			}
			a.logger.InfoContext(ctx, "SNS subscription confirmed", slog.String("topic", m.TopicArn))
			return nil, nil
		case webhook.SNSNotification:
			evs, err = webhook.ParseSES(m.MessageID, m.Message)
		default:
			return nil, nil
		}
	}
	var se *webhook.SignatureError
	if err != nil && !errors.As(err, &se) && !errors.Is(err, webhook.ErrTooManyTokens) {
		return nil, fmt.Errorf("%w: %w", errWebhookPayload, err)
	}
	return evs, err
}

// refuseWebhook counts a refusal by its cause and returns err.
func (a *API) refuseWebhook(provider, cause string, err error) error {
	if a.Metrics != nil {
		a.Metrics.WebhookRefused(provider, cause)
	}
	return err
}
