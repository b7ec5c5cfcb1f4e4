package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld/outbox"
	"github.com/nornweave/nornweave/store"
)

// WebhookEndpointResponse is a webhook endpoint. Secret is set only in
// the answers to its creation and to a rotation.
type WebhookEndpointResponse struct {
	ID             string    `json:"id"`
	URL            string    `json:"url"`
	Events         []string  `json:"events"`
	Description    string    `json:"description"`
	Enabled        bool      `json:"enabled"`
	DisabledReason *string   `json:"disabled_reason"`
	Secret         string    `json:"secret,omitempty"`
	CreatedAt      Timestamp `json:"created_at"`
	UpdatedAt      Timestamp `json:"updated_at"`
}

// WebhookEndpointList is GET /v1/webhooks.
type WebhookEndpointList struct {
	Items []WebhookEndpointResponse `json:"items"`
	Count int                       `json:"count"`
}

// WebhookDeliveryResponse is one attempt of the delivery log.
type WebhookDeliveryResponse struct {
	ID           string     `json:"id"`
	EventID      string     `json:"event_id"`
	EventType    string     `json:"event_type"`
	Attempt      int        `json:"attempt"`
	StatusCode   *int       `json:"status_code"`
	LatencyMS    int64      `json:"latency_ms"`
	Error        *string    `json:"error"`
	ResponseBody *string    `json:"response_body"`
	NextRetryAt  *Timestamp `json:"next_retry_at"`
	CreatedAt    Timestamp  `json:"created_at"`
}

// WebhookDeliveryList is GET /v1/webhooks/{id}/deliveries.
type WebhookDeliveryList struct {
	Items []WebhookDeliveryResponse `json:"items"`
	Count int                       `json:"count"`
	Total int64                     `json:"total"`
}

// EventMessage is a message as an event's data carries it: as GET
// /v1/messages/{id} shows it, without its bodies, and for a per-recipient
// event the recipient and the provider's detail.
type EventMessage struct {
	ID                string         `json:"id"`
	ThreadID          string         `json:"thread_id"`
	InboxID           string         `json:"inbox_id"`
	Direction         string         `json:"direction"`
	ProviderMessageID *string        `json:"provider_message_id"`
	MessageIDHeader   string         `json:"message_id_header"`
	Status            string         `json:"status"`
	Error             *string        `json:"error"`
	Subject           string         `json:"subject"`
	FromAddress       string         `json:"from_address"`
	ToAddresses       []string       `json:"to_addresses"`
	CcAddresses       []string       `json:"cc_addresses"`
	BccAddresses      []string       `json:"bcc_addresses"`
	ReplyToAddresses  []string       `json:"reply_to_addresses"`
	Labels            []string       `json:"labels"`
	Size              int            `json:"size"`
	InReplyTo         *string        `json:"in_reply_to"`
	References        []string       `json:"references"`
	Metadata          map[string]any `json:"metadata"`
	CreatedAt         Timestamp      `json:"created_at"`
	SentAt            *Timestamp     `json:"sent_at"`
	ScheduledAt       *Timestamp     `json:"scheduled_at"`
	NextAttemptAt     *Timestamp     `json:"next_attempt_at"`
	Recipient         *string        `json:"recipient,omitempty"`
	Detail            *string        `json:"detail,omitempty"`
}

// EventData is an event's data about message m (outbox.Options.Render).
func EventData(m *store.Message, recipient, detail *string) any {
	return EventMessage{
		ID: m.ID, ThreadID: m.ThreadID, InboxID: m.InboxID, Direction: m.Direction,
		ProviderMessageID: m.ProviderMessageID, MessageIDHeader: m.MessageIDHeader,
		Status: m.Status, Error: m.Error, Subject: m.Subject, FromAddress: m.FromAddress,
		ToAddresses: nonNil(m.ToAddresses), CcAddresses: nonNil(m.CcAddresses),
		BccAddresses: nonNil(m.BccAddresses), ReplyToAddresses: nonNil(m.ReplyToAddresses),
		Labels: nonNil(m.Labels), Size: m.Size, InReplyTo: m.InReplyTo, References: nonNil(m.References),
		Metadata: nonNilMap(m.Metadata), CreatedAt: Timestamp(m.CreatedAt), SentAt: optTime(m.SentAt),
		ScheduledAt: optTime(m.ScheduledAt), NextAttemptAt: optTime(m.NextAttemptAt),
		Recipient: recipient, Detail: detail,
	}
}

func toEndpoint(e *store.WebhookEndpoint) WebhookEndpointResponse {
	return WebhookEndpointResponse{ID: e.ID, URL: e.URL, Events: nonNil(e.Events), Description: e.Description,
		Enabled: e.Enabled, DisabledReason: e.DisabledReason, CreatedAt: Timestamp(e.CreatedAt),
		UpdatedAt: Timestamp(e.UpdatedAt)}
}

// hooksOut is the handlers' Webhooks, or 404 when the server has none.
func (a *API) hooksOut() (*outbox.Webhooks, error) {
	if a.HooksOut == nil {
		return nil, notFound("Webhooks out are not configured on this server")
	}
	return a.HooksOut, nil
}

// endpointError maps the outbox's errors to the API's.
func endpointError(err error, id string) error {
	var inv *outbox.InvalidError
	switch {
	case errors.As(err, &inv):
		return fieldError(inv.Msg, "value_error", "body", inv.Field)
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("Webhook %s not found", id))
	case errors.Is(err, outbox.ErrTooManyEndpoints):
		return newError(http.StatusConflict, "too_many_webhooks",
			fmt.Sprintf("A server has at most %d webhook endpoints: delete one first", outbox.MaxEndpoints))
	case errors.Is(err, outbox.ErrEndpointDisabled):
		return newError(http.StatusConflict, "webhook_disabled", "The webhook is disabled: enable it (PATCH enabled: true) to replay")
	}
	return err
}

func (a *API) createWebhook(c echo.Context) error {
	h, err := a.hooksOut()
	if err != nil {
		return err
	}
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("url", "events", "description")
	url := obj.str("url", true, 1, 2048)
	events, _ := obj.strItems("events", true, 1)
	desc := obj.str("description", false, 0, 500)
	if err := obj.err(); err != nil {
		return err
	}
	e, err := h.Create(c.Request().Context(), url, events, desc)
	if err != nil {
		return endpointError(err, "")
	}
	out := toEndpoint(e)
	out.Secret = e.Secret
	return c.JSON(http.StatusCreated, out)
}

func (a *API) listWebhooks(c echo.Context) error {
	if _, err := a.hooksOut(); err != nil {
		return err
	}
	es, err := a.Store.WebhookEndpoints(c.Request().Context())
	if err != nil {
		return err
	}
	out := WebhookEndpointList{Items: make([]WebhookEndpointResponse, len(es)), Count: len(es)}
	for i := range es {
		out.Items[i] = toEndpoint(&es[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) getWebhook(c echo.Context) error {
	if _, err := a.hooksOut(); err != nil {
		return err
	}
	e, err := a.Store.WebhookEndpoint(c.Request().Context(), c.Param("id"))
	if err != nil {
		return endpointError(err, c.Param("id"))
	}
	return c.JSON(http.StatusOK, toEndpoint(e))
}

func (a *API) updateWebhook(c echo.Context) error {
	h, err := a.hooksOut()
	if err != nil {
		return err
	}
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("url", "events", "description", "enabled")
	var ch outbox.EndpointChange
	if _, ok := obj.present("url"); ok {
		url := obj.str("url", true, 1, 2048)
		ch.URL = &url
	}
	if _, ok := obj.present("events"); ok {
		ch.Events, _ = obj.strItems("events", true, 1)
	}
	if _, ok := obj.present("description"); ok {
		d := obj.str("description", false, 0, 500)
		ch.Description = &d
	}
	if raw, ok := obj.present("enabled"); ok {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			obj.add("enabled", "Input should be a valid boolean", "bool_type")
		}
		ch.Enabled = &b
	}
	if err := obj.err(); err != nil {
		return err
	}
	e, err := h.Update(c.Request().Context(), c.Param("id"), ch)
	if err != nil {
		return endpointError(err, c.Param("id"))
	}
	return c.JSON(http.StatusOK, toEndpoint(e))
}

func (a *API) deleteWebhook(c echo.Context) error {
	if _, err := a.hooksOut(); err != nil {
		return err
	}
	if err := a.Store.DeleteWebhookEndpoint(c.Request().Context(), c.Param("id")); err != nil {
		return endpointError(err, c.Param("id"))
	}
	return c.NoContent(http.StatusNoContent)
}

func (a *API) rotateWebhookSecret(c echo.Context) error {
	h, err := a.hooksOut()
	if err != nil {
		return err
	}
	e, err := h.Rotate(c.Request().Context(), c.Param("id"))
	if err != nil {
		return endpointError(err, c.Param("id"))
	}
	out := toEndpoint(e)
	out.Secret = e.Secret
	return c.JSON(http.StatusOK, out)
}

func (a *API) listWebhookDeliveries(c echo.Context) error {
	if _, err := a.hooksOut(); err != nil {
		return err
	}
	limit, offset, err := pagination(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	if _, err := a.Store.WebhookEndpoint(ctx, c.Param("id")); err != nil {
		return endpointError(err, c.Param("id"))
	}
	ds, total, err := a.Store.WebhookDeliveries(ctx, store.WebhookDeliveryFilter{EndpointID: c.Param("id"),
		EventID: c.QueryParam("event_id"), Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	out := WebhookDeliveryList{Items: make([]WebhookDeliveryResponse, len(ds)), Count: len(ds), Total: total}
	for i, d := range ds {
		out.Items[i] = WebhookDeliveryResponse{ID: d.ID, EventID: d.EventID, EventType: d.EventType,
			Attempt: d.Attempt, StatusCode: d.StatusCode, LatencyMS: d.LatencyMS, Error: d.Error,
			ResponseBody: d.ResponseBody, NextRetryAt: optTime(d.NextRetryAt), CreatedAt: Timestamp(d.CreatedAt)}
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) replayWebhookDelivery(c echo.Context) error {
	h, err := a.hooksOut()
	if err != nil {
		return err
	}
	if err := h.Replay(c.Request().Context(), c.Param("id"), c.Param("delivery_id")); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return notFound(fmt.Sprintf("Delivery %s of webhook %s not found", c.Param("delivery_id"), c.Param("id")))
		}
		return endpointError(err, c.Param("id"))
	}
	return c.JSON(http.StatusAccepted, map[string]string{"status": "queued"})
}
