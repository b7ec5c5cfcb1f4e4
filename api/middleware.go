package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/nornweave/nornweave/core/logging"
)

// middleware installs, outermost first: trailing-slash tolerance, the
// request id, the access log (which also renders errors, so it logs the
// final status), security headers, panic recovery, the Host allow-list,
// CORS, header-size, NUL and UTF-8 checks, the cross-site check, the API
// key (on /mcp and every /v1 path, so that a 404 or 405 there does not
// answer before it), reading what a refused request still sends, Content-Type,
// the body-size limit, the in-flight budget and the upload rate.
func (a *API) middleware(e *echo.Echo) {
	e.Pre(middleware.RemoveTrailingSlash())
	e.Use(a.requestID, a.accessLog, securityHeaders, a.drain)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			a.logger.ErrorContext(c.Request().Context(), "panic", slog.Any("error", err),
				slog.String("stack", string(stack)))
			return fmt.Errorf("panic: %w", err)
		},
	}))
	e.Use(a.checkHost) // before CORS: a foreign host gets no answer at all
	if len(a.CORSOrigins) > 0 {
		e.Use(cors(a.CORSOrigins))
	}
	e.Use(checkRequest, a.crossSite, a.requireAPIKey(), a.readRefusedBody, requireJSON)
	e.Use(middleware.BodyLimit(strconv.FormatInt(a.bodyLimit, 10) + "B"))
	e.Use(a.limitInFlight, a.enforceUploadRate)
}

// drainRetryAfter is what a request refused during shutdown is told: about
// the time a restart takes.
const drainRetryAfter = "5"

// drain refuses new requests once the server has begun to shut down, with a
// 503 the client can retry (against this server restarted, or another
// behind the same balancer) rather than a reset connection; /health still
// answers, since the process is alive. Requests already inside a handler
// finish normally.
func (a *API) drain(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !a.draining.Load() || c.Path() == "/health" {
			return next(c)
		}
		h := c.Response().Header()
		h.Set("Retry-After", drainRetryAfter)
		h.Set(echo.HeaderConnection, "close")
		return newError(http.StatusServiceUnavailable, "shutting_down", "Server is shutting down; retry shortly")
	}
}

// requestID gives every request an id: the client's X-Request-Id when it is
// short and printable, else a new one. It goes back in the response header
// and, through the context, onto every log line written for the request.
func (a *API) requestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !validRequestID(id) {
			id = uuid.NewString()
		}
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		req := c.Request()
		c.SetRequest(req.WithContext(logging.WithRequestID(req.Context(), id)))
		return next(c)
	}
}

// validRequestID accepts up to 64 letters, digits and "-_.:" — enough for
// UUIDs and trace ids, and nothing that could forge a log line or header.
func validRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-_.:", c) >= 0) {
			return false
		}
	}
	return true
}

// requireAPIKey enforces API_KEY on every path under /v1 (routes or not)
// and on /mcp.
// X-API-Key, when present, is the only candidate; otherwise
// "Authorization: Bearer <key>". OPTIONS always passes so that browsers can
// preflight. A client (clientKey: behind TRUSTED_PROXIES, the address they
// forward) with AUTH_FAILURE_LIMIT failures in 15 minutes gets 429 until
// the oldest of them expires, whatever key it sends; reaching the limit is
// logged at WARN.
func (a *API) requireAPIKey() echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if a.APIKey == "" {
			return next
		}
		want := sha256.Sum256([]byte(a.APIKey))
		return func(c echo.Context) error {
			r := c.Request()
			if r.Method == http.MethodOptions || !needsKey(r.URL.Path) {
				return next(c)
			}
			client := a.clientKey(r)
			if blocked, wait := a.authFailures.blocked(client, a.Clock.Now()); blocked {
				c.Response().Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
				return newError(http.StatusTooManyRequests, "too_many_auth_failures",
					"Too many failed API key attempts from this address; retry later")
			}
			h := r.Header
			key, present := h.Get("X-API-Key"), len(h.Values("X-API-Key")) > 0
			if !present {
				if scheme, token, ok := strings.Cut(h.Get(echo.HeaderAuthorization), " "); ok && strings.EqualFold(scheme, "Bearer") {
					key = strings.TrimSpace(token)
				}
			}
			// Hashing first makes the comparison constant-time in the length too.
			got := sha256.Sum256([]byte(key))
			if key == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				ip := a.clientAddr(r).String()
				a.logger.InfoContext(r.Context(), "api key rejected", slog.String("client", ip))
				if a.authFailures.fail(client, a.Clock.Now()) {
					a.logger.WarnContext(r.Context(), "too many failed API key attempts; client locked out",
						slog.String("client", ip), slog.Int("failures", a.AuthFailureLimit),
						slog.Int64("window_s", int64(authFailureWindow/time.Second)))
				}
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
				return newError(http.StatusUnauthorized, "unauthorized", "Missing or invalid API key")
			}
			return next(c)
		}
	}
}

// needsKey reports whether path is behind API_KEY: everything under /v1,
// and the MCP endpoint, whose tools do what /v1 does.
func needsKey(path string) bool {
	for _, p := range []string{"/v1", "/mcp"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
