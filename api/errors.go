package api

import (
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// apiError is an error with its HTTP status and the one JSON error shape.
type apiError struct {
	Status int
	Detail string
	Code   string
}

func (e *apiError) Error() string { return e.Detail }

func newError(status int, code, detail string) *apiError {
	return &apiError{Status: status, Detail: detail, Code: code}
}

func notFound(detail string) *apiError {
	return newError(http.StatusNotFound, "not_found", detail)
}

// errorBody is {"detail": ..., "code": ...}.
type errorBody struct {
	Detail any    `json:"detail"`
	Code   string `json:"code,omitempty"`
}

// rateLimitedBody adds what a throttled client needs to back off.
type rateLimitedBody struct {
	Detail     string   `json:"detail"`
	Code       string   `json:"code"`
	RetryAfter int      `json:"retry_after"`
	Violated   []string `json:"violated"`
}

// internalBody is the only thing a client learns of an unexpected failure.
type internalBody struct {
	Detail    string `json:"detail"`
	Code      string `json:"code"`
	RequestID string `json:"request_id"`
}

// errorHandler is the single place that turns errors into HTTP responses.
func (a *API) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, body := a.errorResponse(err, c)
	if c.Request().Method == http.MethodHead {
		err = c.NoContent(status)
	} else {
		err = c.JSON(status, body)
	}
	if err != nil {
		a.logger.ErrorContext(c.Request().Context(), "write error response", slog.Any("error", err))
	}
}

func (a *API) errorResponse(err error, c echo.Context) (int, any) {
	var (
		ae      *apiError
		ve      *ValidationError
		nf      *skuld.NotFoundError
		blocked *skuld.BlockedError
		rl      *skuld.RateLimitedError
		down    *skuld.UnavailableError
		he      *echo.HTTPError
	)
	switch {
	case errors.As(err, &ae):
		return ae.Status, errorBody{Detail: ae.Detail, Code: ae.Code}
	case errors.As(err, &ve):
		return http.StatusUnprocessableEntity, errorBody{Detail: ve.Errors, Code: "validation_error"}
	case errors.As(err, &nf):
		return http.StatusNotFound, errorBody{Detail: nf.Error(), Code: "not_found"}
	case errors.As(err, &blocked):
		return http.StatusForbidden, errorBody{Detail: blocked.Error(), Code: "domain_blocked"}
	case errors.As(err, &rl):
		c.Response().Header().Set("Retry-After", strconv.Itoa(rl.RetryAfterSeconds()))
		return http.StatusTooManyRequests, rateLimitedBody{Detail: rl.Error(), Code: "rate_limited",
			RetryAfter: rl.RetryAfterSeconds(), Violated: rl.Windows()}
	case errors.As(err, &down):
		// THROTTLE_FAIL=closed: nothing was sent; the cause is logged.
		a.logger.ErrorContext(c.Request().Context(), "throttle backend unreachable; refusing the request",
			slog.String("backend", down.Backend), slog.Any("error", down.Err))
		c.Response().Header().Set("Retry-After", throttleDownRetryAfter)
		return http.StatusServiceUnavailable, errorBody{Detail: "Send throttle unavailable; retry shortly",
			Code: "throttle_unavailable"}
	case errors.Is(err, skuld.ErrShuttingDown):
		return http.StatusServiceUnavailable, errorBody{Detail: "Server is shutting down; retry shortly", Code: "shutting_down"}
	case errors.Is(err, store.ErrNotFound):
		return http.StatusNotFound, errorBody{Detail: "Not Found", Code: "not_found"}
	case errors.As(err, &he):
		return a.httpErrorResponse(he)
	}
	if c.Request().Context().Err() != nil {
		// The client went away (or the server's read timeout cut it off):
		// whatever failed, nobody is waiting for an answer and it is not
		// the server's fault.
		return statusClientClosedRequest, errorBody{Detail: "Client closed the request", Code: "client_closed_request"}
	}
	id := logging.RequestID(c.Request().Context())
	a.logger.ErrorContext(c.Request().Context(), "request failed",
		slog.String("method", c.Request().Method), slog.String("path", c.Path()), slog.Any("error", err))
	return http.StatusInternalServerError, internalBody{
		Detail:    "Internal server error (request id " + id + ")",
		Code:      "internal_error",
		RequestID: id,
	}
}

// httpErrorResponse maps echo's own errors (routing, body limit) to the
// FastAPI wording existing clients know.
func (a *API) httpErrorResponse(he *echo.HTTPError) (int, any) {
	switch he.Code {
	case http.StatusNotFound:
		return he.Code, errorBody{Detail: "Not Found", Code: "not_found"}
	case http.StatusMethodNotAllowed:
		return he.Code, errorBody{Detail: "Method Not Allowed", Code: "method_not_allowed"}
	case http.StatusRequestEntityTooLarge:
		return he.Code, errorBody{Detail: "Request body too large: the limit is " +
			strconv.FormatInt(a.bodyLimit>>20, 10) + " MB", Code: "payload_too_large"}
	case http.StatusUnauthorized:
		return he.Code, errorBody{Detail: "Missing or invalid API key", Code: "unauthorized"}
	}
	return he.Code, errorBody{Detail: http.StatusText(he.Code), Code: "http_" + strconv.Itoa(he.Code)}
}

// throttleDownRetryAfter is the Retry-After of a 503 for an unreachable
// throttle backend: long enough not to hammer it, short enough to resume
// soon after it is back.
const throttleDownRetryAfter = "5"
