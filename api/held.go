package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// scheduleNowWithin is how close to now a scheduled_at counts as now: the
// message is sent at once, as without the field.
const scheduleNowWithin = time.Second

// readHold reads the fields that hold a send, scheduled_at and
// on_throttle, into req's terms, and removes them from obj so that the
// binder shared with the send_email tool (readSend) sees the rest; their
// problems join obj's.
func (a *API) readHold(obj object) (at *time.Time, queue bool) {
	queue = a.QueueOnThrottle
	if raw, ok := obj.present("on_throttle"); ok {
		var s string
		switch err := json.Unmarshal(raw, &s); {
		case err != nil:
			obj.add("on_throttle", "Input should be a valid string", "string_type")
		case s == "queue", s == "reject":
			queue = s == "queue"
		default:
			obj.add("on_throttle", "Input should be 'reject' or 'queue'", "literal_error")
		}
	}
	at = a.readScheduledAt(obj)
	delete(obj.fields, "on_throttle")
	delete(obj.fields, "scheduled_at")
	return at, queue
}

// readScheduledAt reads scheduled_at: nil when absent, null, or due within
// a second (send now); a problem when not RFC 3339 with an offset, or
// further ahead than SCHEDULE_MAX_AHEAD.
func (a *API) readScheduledAt(obj object) *time.Time {
	raw, ok := obj.present("scheduled_at")
	if !ok {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		obj.add("scheduled_at", "Input should be a valid string", "string_type")
		return nil
	}
	at, err := parseRFC3339(s)
	if err != nil {
		// The example is an hour from now: inside any SCHEDULE_MAX_AHEAD.
		obj.add("scheduled_at", "Input should be an RFC 3339 date-time with an offset, like "+
			a.Clock.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04:05+00:00")+" (an hour from now)", "datetime_parsing")
		return nil
	}
	now := a.Clock.Now()
	switch ahead := at.Sub(now); {
	case ahead > a.ScheduleMaxAhead:
		obj.add("scheduled_at", fmt.Sprintf("scheduled_at is more than SCHEDULE_MAX_AHEAD (%s) ahead", a.ScheduleMaxAhead), "value_error")
		return nil
	case ahead <= scheduleNowWithin:
		return nil
	}
	at = at.UTC()
	return &at
}

// statusOf is the status code of a send's answer: 202 for a message
// held (scheduled or queued), 201 for one sent (or failed) at once.
func statusOf(m *store.Message) int {
	if store.Held(m.Status) {
		return http.StatusAccepted
	}
	return http.StatusCreated
}

// cancelMessage is POST /v1/messages/{id}/cancel.
func (a *API) cancelMessage(c echo.Context) error {
	ctx := c.Request().Context()
	if c.Request().ContentLength != 0 {
		obj, err := decodeBody(c.Request().Body)
		if err != nil {
			return err
		}
		obj.forbidExtra()
		if err := obj.err(); err != nil {
			return err
		}
	}
	m, err := a.CancelMessage(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ToMessage(m))
}

// CancelMessage cancels a held message: what POST /v1/messages/{id}/cancel
// does, for the MCP tools too. A message no longer held is a 409
// not_cancelable.
func (a *API) CancelMessage(ctx context.Context, id string) (*store.Message, error) {
	m, err := a.Sender.Cancel(ctx, id)
	return m, a.heldError(ctx, id, err, "not_cancelable", "canceled")
}

// patchMessage is PATCH /v1/messages/{id}: {"scheduled_at": ...}.
func (a *API) patchMessage(c echo.Context) error {
	ctx := c.Request().Context()
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("scheduled_at")
	if _, ok := obj.present("scheduled_at"); !ok {
		obj.add("scheduled_at", "Field required", "missing")
	}
	at := a.readScheduledAt(obj)
	if err := obj.err(); err != nil {
		return err
	}
	if at == nil { // due within a second: as soon as possible
		now := a.Clock.Now().UTC()
		at = &now
	}
	m, err := a.RescheduleMessage(ctx, c.Param("id"), *at)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, ToMessage(m))
}

// RescheduleMessage moves a held message to at; a message no longer held
// is a 409 not_reschedulable.
func (a *API) RescheduleMessage(ctx context.Context, id string, at time.Time) (*store.Message, error) {
	m, err := a.Sender.Reschedule(ctx, id, at)
	return m, a.heldError(ctx, id, err, "not_reschedulable", "rescheduled")
}

// heldError maps a held message's change that failed: 404 for a message
// that does not exist, 409 with code for one no longer held.
func (a *API) heldError(ctx context.Context, id string, err error, code, verb string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return notFound(fmt.Sprintf("Message %s not found", id))
	case errors.Is(err, store.ErrNotHeld), errors.Is(err, skuld.ErrNoHold):
		// Without held sends (ErrNoHold) no message is held.
		status := "no longer held"
		m, merr := a.Store.Message(ctx, id)
		switch {
		case errors.Is(merr, store.ErrNotFound):
			return notFound(fmt.Sprintf("Message %s not found", id))
		case merr == nil:
			status = m.Status
		}
		return newError(http.StatusConflict, code, fmt.Sprintf(
			"Message %s is %s; only a scheduled or queued message can be %s", id, status, verb))
	}
	return err
}

// messageStatuses are the values of GET /v1/messages?status=.
var messageStatuses = []string{store.StatusScheduled, store.StatusQueued, store.StatusSending,
	store.StatusSent, store.StatusFailed, store.StatusCanceled}
