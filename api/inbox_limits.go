package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// maxInboxLimit bounds an inbox override; more than a million sends a
// minute is a typo, not a policy.
const maxInboxLimit = 1_000_000

// patchInbox renames an inbox and sets or clears its throttle overrides:
// {"name": "...", "rate_limit": {"per_minute": 10, "per_hour": null,
// "per_day": 1000}}. An
// absent key leaves its value as it is; null in rate_limit is back to the
// default. Every other field is read-only and named in a 422.
func (a *API) patchInbox(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	for k := range obj.fields {
		if k != "name" && k != "rate_limit" {
			obj.add(k, "Field is read-only or unknown; only name and rate_limit can be changed", "extra_forbidden")
		}
	}
	var ch store.InboxChanges
	if _, sent := obj.fields["name"]; sent {
		name := obj.inboxName()
		ch.Name = &name
	}
	if raw, ok := obj.present("rate_limit"); ok {
		rl := obj.child("rate_limit", raw)
		rl.forbidExtra("per_minute", "per_hour", "per_day")
		ch.SetPerMinute, ch.PerMinute = rl.nullableInt("per_minute", 0, maxInboxLimit)
		ch.SetPerHour, ch.PerHour = rl.nullableInt("per_hour", 0, maxInboxLimit)
		ch.SetPerDay, ch.PerDay = rl.nullableInt("per_day", 0, maxInboxLimit)
	}
	if err := obj.err(); err != nil {
		return err
	}
	id := c.Param("id")
	in, err := a.Store.UpdateInbox(c.Request().Context(), id, ch, a.Clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Inbox %s not found", id))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toInbox(in))
}

// inboxRateLimit shows an inbox's windows as GET /v1/rate-limit shows the
// global ones, with the limits that apply to it.
func (a *API) inboxRateLimit(c echo.Context) error {
	snap, err := a.WindowsOf(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.ToRateLimit(snap.Inbox, false))
}

// child reads the JSON object raw, the value of field name, reporting its
// problems under this object's location.
func (o object) child(name string, raw json.RawMessage) object {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		o.add(name, "Input should be a valid dictionary or object", "model_attributes_type")
		fields = map[string]json.RawMessage{}
	}
	return object{fields: fields, loc: append(append([]any{}, o.loc...), name), errs: o.errs}
}

// nullableInt reads an optional integer that may be null: set reports that
// the key was sent, and v is nil for null.
func (o object) nullableInt(name string, min, max int) (set bool, v *int) {
	raw, sent := o.fields[name]
	if !sent {
		return false, nil
	}
	if string(raw) == "null" {
		return true, nil
	}
	var n int
	if err := json.Unmarshal(raw, &n); err != nil {
		o.add(name, "Input should be a valid integer or null", "int_type")
		return false, nil
	}
	o.checkRange(name, n, min, max)
	return true, &n
}
