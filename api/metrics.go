package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// Metrics is what the HTTP layer reports; internal/metrics implements it
// with Prometheus, so that api never imports it.
type Metrics interface {
	// Request reports one answered request by its method (one the API
	// routes, or "other") and route template ("/v1/messages/:id", or
	// "unmatched"), never the raw method or URL, which a client chooses.
	Request(method, route string, status int, d time.Duration)
	// Replayed reports a response replayed for a repeated Idempotency-Key.
	Replayed()
	// ToolCall reports one MCP tool call by the tool's name and its
	// outcome: "ok", or the refusal's code (rate_limited, ...). Both are
	// closed sets: unknown tools are refused before a handler runs.
	ToolCall(tool, outcome string)
	// WebhookRefused reports a provider's webhook refused, by its cause:
	// invalid_signature, not_configured, too_large, invalid_payload, busy.
	WebhookRefused(provider, cause string)
	// Suppressed reports an address added to the suppression list.
	Suppressed(reason string)
	// Handler serves GET /metrics.
	Handler() http.Handler
}

// nopMetrics is the Metrics of an API built without them: /metrics is then
// an empty page rather than a missing route, so the routes stay the same.
type nopMetrics struct{}

func (nopMetrics) Request(string, string, int, time.Duration) {}
func (nopMetrics) Replayed()                                  {}
func (nopMetrics) ToolCall(string, string)                    {}
func (nopMetrics) WebhookRefused(string, string)              {}
func (nopMetrics) Suppressed(string)                          {}
func (nopMetrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
}

// unmatchedRoute labels requests that matched no route, so a scan of
// random URLs cannot make a label value per URL.
const unmatchedRoute = "unmatched"

// otherMethod labels a request whose method is none of routedMethods.
const otherMethod = "other"

// routedMethods are the methods the routes (and a CORS preflight) use: the
// only method label values besides otherMethod.
var routedMethods = map[string]bool{
	http.MethodGet: true, http.MethodHead: true, http.MethodPost: true, http.MethodPatch: true,
	http.MethodDelete: true, http.MethodOptions: true,
}

// methodLabel is the request's method if the API routes it, else
// otherMethod: a method is any token the client makes up (700 requests
// with 30 KB ones grew /metrics to 256 MB), and a label must come from a
// closed set.
func methodLabel(method string) string {
	if routedMethods[method] {
		return method
	}
	return otherMethod
}

// observe reports every request to Metrics once its final status is known.
// It is the outermost middleware, so the status is what the client got.
func (a *API) observe(routes map[string]bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			start := time.Now()
			err := next(c)
			if err != nil {
				c.Error(err)
			}
			route := c.Path()
			if !routes[c.Request().Method+" "+route] {
				route = unmatchedRoute
			}
			a.Metrics.Request(methodLabel(c.Request().Method), route, c.Response().Status, time.Since(start))
			if c.Response().Header().Get("Idempotent-Replayed") == "true" {
				a.Metrics.Replayed()
			}
			return nil
		}
	}
}

// metrics serves the Prometheus metrics, behind METRICS_API_KEY when set.
func (a *API) metrics(c echo.Context) error {
	if a.MetricsAPIKey != "" {
		want := sha256.Sum256([]byte(a.MetricsAPIKey))
		got := sha256.Sum256([]byte(presentedKey(c.Request().Header)))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
			return newError(http.StatusUnauthorized, "unauthorized", "Missing or invalid metrics key")
		}
	}
	a.Metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}

// presentedKey is the key a request carries, read as for API_KEY:
// X-API-Key when present, else "Authorization: Bearer <key>".
func presentedKey(h http.Header) string {
	if len(h.Values("X-API-Key")) > 0 {
		return h.Get("X-API-Key")
	}
	if scheme, token, ok := strings.Cut(h.Get(echo.HeaderAuthorization), " "); ok && strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return ""
}
