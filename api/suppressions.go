package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/store"
)

// SuppressionResponse is one address of the suppression list.
type SuppressionResponse struct {
	Email     string    `json:"email"`
	Reason    string    `json:"reason"`
	Source    string    `json:"source"`
	MessageID *string   `json:"message_id"`
	CreatedAt Timestamp `json:"created_at"`
}

// SuppressionList is GET /v1/suppressions: a page and the total.
type SuppressionList struct {
	Items []SuppressionResponse `json:"items"`
	Count int                   `json:"count"`
	Total int64                 `json:"total"`
}

func toSuppression(sp *store.Suppression) SuppressionResponse {
	return SuppressionResponse{Email: sp.Email, Reason: sp.Reason, Source: sp.Source, MessageID: sp.MessageID,
		CreatedAt: Timestamp(sp.CreatedAt)}
}

// suppressionReasons are the reasons a list may be filtered by.
var suppressionReasons = []string{store.ReasonBounce, store.ReasonComplaint, store.ReasonManual}

func (a *API) listSuppressions(c echo.Context) error {
	limit, offset, err := pagination(c)
	if err != nil {
		return err
	}
	out, err := a.Suppressions(c.Request().Context(), c.QueryParam("email"), c.QueryParam("reason"), limit, offset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// Suppressions is a page of the suppression list, newest first, filtered
// by address (any spelling of it) and reason: GET /v1/suppressions and the
// list_suppressions tool.
func (a *API) Suppressions(ctx context.Context, email, reason string, limit, offset int) (SuppressionList, error) {
	if reason != "" && !slices.Contains(suppressionReasons, reason) {
		return SuppressionList{}, fieldError("Input should be 'bounce', 'complaint' or 'manual'", "literal_error", "query", "reason")
	}
	f := store.SuppressionFilter{Reason: reason, Limit: limit, Offset: offset}
	if email != "" {
		f.Email = events.Canonical(email)
	}
	list, total, err := a.Store.Suppressions(ctx, f)
	if err != nil {
		return SuppressionList{}, err
	}
	out := SuppressionList{Items: make([]SuppressionResponse, len(list)), Count: len(list), Total: total}
	for i := range list {
		out.Items[i] = toSuppression(&list[i])
	}
	return out, nil
}

// createSuppression is POST /v1/suppressions {"email", "reason": "manual"}:
// 201 with the address added, or 200 with the entry already on the list,
// whose reason stays (a bounce is not rewritten as manual).
func (a *API) createSuppression(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("email", "reason")
	var email address.Address
	if raw := obj.str("email", true, 1, 320); raw != "" {
		var err error
		if email, err = address.Parse(raw); err != nil {
			obj.add("email", "Invalid email address: "+raw, "value_error")
		}
	}
	if raw, ok := obj.present("reason"); ok {
		if reason := obj.str("reason", false, 0, 0); reason != store.ReasonManual && obj.err() == nil {
			obj.add("reason", "Input should be 'manual': bounces and complaints are added by their events ("+string(raw)+")", "literal_error")
		}
	}
	if err := obj.err(); err != nil {
		return err
	}
	sp, added, err := a.Store.AddSuppression(c.Request().Context(), &store.Suppression{
		Email: email.Key(), Reason: store.ReasonManual, Source: "api", CreatedAt: a.Clock.Now()})
	if err != nil {
		return err
	}
	if added && a.Metrics != nil {
		a.Metrics.Suppressed(store.ReasonManual)
	}
	status := http.StatusOK
	if added {
		status = http.StatusCreated
	}
	return c.JSON(status, toSuppression(sp))
}

func (a *API) deleteSuppression(c echo.Context) error {
	email, err := url.PathUnescape(c.Param("email"))
	if err != nil {
		email = c.Param("email")
	}
	if err := a.RemoveSuppression(c.Request().Context(), email); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// RemoveSuppression takes email (any spelling of it) off the list: DELETE
// /v1/suppressions/{email} and the remove_suppression tool.
func (a *API) RemoveSuppression(ctx context.Context, email string) error {
	err := a.Store.DeleteSuppression(ctx, events.Canonical(email))
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Suppression %s not found", email))
	}
	return err
}
