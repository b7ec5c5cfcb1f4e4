package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/logging"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
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

// NewError is an error the API answers, whichever the face (REST, MCP),
// with status, code and detail.
func NewError(status int, code, detail string) error { return newError(status, code, detail) }

func notFound(detail string) *apiError {
	return newError(http.StatusNotFound, "not_found", detail)
}

// ErrorBody is {"detail": ..., "code": ...}.
type ErrorBody struct {
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

// tooManyBody names the window whose limit a send's recipients exceed.
type tooManyBody struct {
	Detail     string   `json:"detail"`
	Code       string   `json:"code"`
	Violated   []string `json:"violated"`
	Limit      int      `json:"limit"`
	Recipients int      `json:"recipients"`
}

// suppressedBody names each suppressed recipient, with why and since when.
type suppressedBody struct {
	Detail     string                `json:"detail"`
	Code       string                `json:"code"`
	Suppressed []SuppressedRecipient `json:"suppressed"`
}

// SuppressedRecipient is a recipient a send was refused for.
type SuppressedRecipient struct {
	Email     string    `json:"email"`
	Reason    string    `json:"reason"`
	CreatedAt Timestamp `json:"created_at"`
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

// errorResponse renders Classify's answer as HTTP: the status, the body in
// the one JSON error shape, and Retry-After when there is one.
func (a *API) errorResponse(err error, c echo.Context) (int, any) {
	r := c.Request()
	p := a.Classify(r.Context(), err, slog.String("method", r.Method), slog.String("path", c.Path()))
	if p.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(p.RetryAfter))
	}
	switch {
	case p.Code == "rate_limited":
		return p.Status, rateLimitedBody{Detail: p.Detail, Code: p.Code, RetryAfter: p.RetryAfter, Violated: p.Violated}
	case p.Code == skuld.TooManyRecipientsCode:
		return p.Status, tooManyBody{Detail: p.Detail, Code: p.Code, Violated: p.Violated, Limit: p.Limit, Recipients: p.Recipients}
	case p.Suppressed != nil:
		return p.Status, suppressedBody{Detail: p.Detail, Code: p.Code, Suppressed: p.Suppressed}
	case p.RequestID != "":
		return p.Status, internalBody{Detail: p.Detail, Code: p.Code, RequestID: p.RequestID}
	case p.Fields != nil:
		return p.Status, ErrorBody{Detail: p.Fields, Code: p.Code}
	}
	return p.Status, ErrorBody{Detail: p.Detail, Code: p.Code}
}

// Problem is an error as any client of the API is told it, whichever the
// interface (REST, MCP): the same code and sentence for the same error.
type Problem struct {
	Status int
	Code   string
	Detail string       // the sentence; for a validation error, its problems joined
	Fields []FieldError // a validation error's problems, one per field
	// RetryAfter is when to try again, in whole seconds (0: no advice):
	// a throttle refusal's, or a short wait for a passing condition.
	RetryAfter int
	Violated   []string // a throttle refusal's full windows
	// Limit and Recipients are a too_many_recipients refusal's: the
	// window's limit, and the send's recipients above it.
	Limit, Recipients int
	// Suppressed are the recipients a send was refused for, on the
	// suppression list.
	Suppressed []SuppressedRecipient
	RequestID  string // an unexpected failure's request id, which the log names
}

// Classify is the one mapping from errors to what a client is told. An
// unexpected failure is logged with attrs (where it happened) and answered
// with a generic sentence naming the request id; its cause never reaches
// the client. It reads nothing but ctx, so every interface can use it.
func (a *API) Classify(ctx context.Context, err error, attrs ...slog.Attr) Problem {
	var (
		ae         *apiError
		ve         *ValidationError
		nf         *skuld.NotFoundError
		blocked    *skuld.BlockedError
		suppressed *skuld.SuppressedError
		rl         *throttle.RateLimitedError
		tooLarge   *throttle.TooLargeError
		down       *throttle.UnavailableError
		he         *echo.HTTPError
	)
	switch {
	case errors.As(err, &ae):
		return Problem{Status: ae.Status, Code: ae.Code, Detail: ae.Detail}
	case errors.As(err, &ve):
		return Problem{Status: http.StatusUnprocessableEntity, Code: "validation_error", Detail: ve.Sentence(),
			Fields: ve.Errors}
	case errors.As(err, &nf):
		return Problem{Status: http.StatusNotFound, Code: "not_found", Detail: nf.Error()}
	case errors.As(err, &blocked):
		return Problem{Status: http.StatusForbidden, Code: "domain_blocked", Detail: blocked.Error()}
	case errors.As(err, &suppressed):
		list := make([]SuppressedRecipient, len(suppressed.Suppressed))
		for i, sp := range suppressed.Suppressed {
			list[i] = SuppressedRecipient{Email: sp.Email, Reason: sp.Reason, CreatedAt: Timestamp(sp.CreatedAt)}
		}
		return Problem{Status: http.StatusUnprocessableEntity, Code: skuld.SuppressedCode, Detail: suppressed.Error(),
			Suppressed: list}
	case errors.As(err, &tooLarge):
		// No wait would admit it: a 429 would be retried for ever.
		return Problem{Status: http.StatusUnprocessableEntity, Code: skuld.TooManyRecipientsCode,
			Detail:   "Too many recipients: " + tooLarge.Error() + "; split the send",
			Violated: windowNames([]throttle.Window{tooLarge.Window}), Limit: tooLarge.Limit, Recipients: tooLarge.Cost}
	case errors.As(err, &rl):
		return Problem{Status: http.StatusTooManyRequests, Code: "rate_limited", Detail: rl.Error(),
			RetryAfter: rl.RetryAfterSeconds(), Violated: windowNames(rl.Windows())}
	case errors.As(err, &down):
		// THROTTLE_FAIL=closed: nothing was sent; the cause is logged.
		a.logger.ErrorContext(ctx, "throttle backend unreachable; refusing the request",
			slog.String("backend", down.Backend), slog.Any("error", down.Err))
		return Problem{Status: http.StatusServiceUnavailable, Code: "throttle_unavailable",
			Detail: "Send throttle unavailable; retry shortly", RetryAfter: throttleDownRetryAfter}
	case errors.Is(err, skuld.ErrShuttingDown):
		return Problem{Status: http.StatusServiceUnavailable, Code: "shutting_down",
			Detail: "Server is shutting down; retry shortly"}
	case errors.Is(err, store.ErrNotFound):
		return Problem{Status: http.StatusNotFound, Code: "not_found", Detail: "Not Found"}
	case errors.Is(err, store.ErrUnavailable):
		// The connection was lost, or none could be made (the store has
		// already retried what it safely could): retry later, not a bug.
		a.logger.LogAttrs(ctx, slog.LevelError, "database unavailable; refusing the request",
			append(attrs, slog.Any("error", err))...)
		return Problem{Status: http.StatusServiceUnavailable, Code: "database_unavailable",
			Detail: "Database unavailable; retry shortly", RetryAfter: databaseDownRetryAfter}
	case errors.Is(err, store.ErrInboxChanged):
		// Changed again each time the send was judged (by PATCHes on
		// other servers): nothing was recorded or sent.
		return Problem{Status: http.StatusServiceUnavailable, Code: "inbox_changing",
			Detail: "The sending inbox changed while the message was being sent; nothing was sent, retry", RetryAfter: 1}
	case errors.As(err, &he):
		return a.HTTPErrorProblem(he)
	}
	if ctx.Err() != nil {
		// The client went away (or the server's read timeout cut it off):
		// whatever failed, nobody is waiting for an answer and it is not
		// the server's fault.
		return Problem{Status: statusClientClosedRequest, Code: "client_closed_request", Detail: "Client closed the request"}
	}
	id := logging.RequestID(ctx)
	a.logger.LogAttrs(ctx, slog.LevelError, "request failed", append(attrs, slog.Any("error", err))...)
	return Problem{Status: http.StatusInternalServerError, Code: "internal_error",
		Detail: "Internal server error (request id " + id + ")", RequestID: id}
}

// HTTPErrorProblem maps echo's own errors (routing, body limit) to the
// FastAPI wording existing clients know.
func (a *API) HTTPErrorProblem(he *echo.HTTPError) Problem {
	p := Problem{Status: he.Code}
	switch he.Code {
	case http.StatusNotFound:
		p.Code, p.Detail = "not_found", "Not Found"
	case http.StatusMethodNotAllowed:
		p.Code, p.Detail = "method_not_allowed", "Method Not Allowed"
	case http.StatusRequestEntityTooLarge:
		p.Code, p.Detail = "payload_too_large", "Request body too large: the limit is "+
			strconv.FormatInt(a.bodyLimit>>20, 10)+" MB"
	case http.StatusUnauthorized:
		p.Code, p.Detail = "unauthorized", "Missing or invalid API key"
	default:
		p.Code, p.Detail = "http_"+strconv.Itoa(he.Code), http.StatusText(he.Code)
	}
	return p
}

// databaseDownRetryAfter is the Retry-After, in seconds, of a 503 for a
// database that cannot be reached: about what a restart or a fail-over
// takes.
const databaseDownRetryAfter = 5

// throttleDownRetryAfter is the Retry-After, in seconds, of a 503 for an
// unreachable throttle backend: long enough not to hammer it, short enough
// to resume soon after it is back.
const throttleDownRetryAfter = 5

// windowNames is how the windows of a refusal read in its "violated".
func windowNames(ws []throttle.Window) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = w.String()
	}
	return out
}
