package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/activity"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// CountRefusal counts a send refused with err under its reason, for the
// dashboard's chart of refusals (Options.Activity): the throttle's 429, the
// domain filter, the suppression list, or the request itself (400, 413,
// 415, 422). Anything else, a nil err included, is not the refusal of a
// send and is not counted: an unknown inbox, an unavailable database, a
// shutdown, a failure of ours. REST and MCP sends both count here.
func (a *API) CountRefusal(err error) {
	if err == nil || a.Activity == nil {
		return
	}
	if reason := refusalReason(err); reason != "" {
		a.Activity.Add(reason)
	}
}

// refusalReason is the reason err refuses a send under, "" if none.
func refusalReason(err error) string {
	var (
		rl *throttle.RateLimitedError
		bl *skuld.BlockedError
		sp *skuld.SuppressedError
		tl *throttle.TooLargeError
		ve *ValidationError
		ae *apiError
		he *echo.HTTPError
	)
	switch {
	case errors.As(err, &rl):
		return activity.Throttled
	case errors.As(err, &bl):
		return activity.DomainBlocked
	case errors.As(err, &sp):
		return activity.Suppressed
	case errors.As(err, &tl), errors.As(err, &ve):
		return activity.Validation
	case errors.As(err, &ae):
		return requestRefusal(ae.Status)
	case errors.As(err, &he):
		return requestRefusal(he.Code)
	}
	return ""
}

// requestRefusal is activity.Validation for the statuses that refuse a
// request for what it is.
func requestRefusal(status int) string {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusUnsupportedMediaType,
		http.StatusUnprocessableEntity:
		return activity.Validation
	}
	return ""
}
