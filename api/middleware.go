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
// final status), panic recovery, CORS and the body-size limit.
func (a *API) middleware(e *echo.Echo) {
	e.Pre(middleware.RemoveTrailingSlash())
	e.Use(a.requestID, a.accessLog)
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			a.logger.ErrorContext(c.Request().Context(), "panic", slog.Any("error", err),
				slog.String("stack", string(stack)))
			return fmt.Errorf("panic: %w", err)
		},
	}))
	if len(a.CORSOrigins) > 0 {
		e.Use(middleware.CORSWithConfig(middleware.CORSConfig{
			AllowOrigins: a.CORSOrigins,
			AllowMethods: []string{http.MethodGet, http.MethodPost, http.MethodDelete, http.MethodOptions},
			AllowHeaders: []string{echo.HeaderContentType, echo.HeaderAuthorization, "X-API-Key",
				"Idempotency-Key", echo.HeaderXRequestID},
			ExposeHeaders: []string{"Retry-After", echo.HeaderXRequestID, "X-RateLimit-Limit",
				"X-RateLimit-Remaining", "X-RateLimit-Reset", "RateLimit", "RateLimit-Policy"},
		}))
	}
	e.Use(middleware.BodyLimit(strconv.FormatInt(a.bodyLimit, 10) + "B"))
	e.Use(a.limitInFlight)
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

func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for _, r := range id {
		if r < 0x21 || r > 0x7e {
			return false
		}
	}
	return true
}

// accessLog logs one line per request after the error handler has run.
func (a *API) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		level := slog.LevelInfo
		if c.Path() == "/health" || c.Path() == "/ready" {
			level = slog.LevelDebug
		}
		a.logger.LogAttrs(c.Request().Context(), level, "request",
			slog.String("method", c.Request().Method), slog.String("path", c.Request().URL.Path),
			slog.Int("status", c.Response().Status),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
		return nil
	}
}

// requireAPIKey enforces API_KEY on /v1. X-API-Key, when present, is the only
// candidate; otherwise "Authorization: Bearer <key>". OPTIONS always passes
// so that browsers can preflight.
func (a *API) requireAPIKey(next echo.HandlerFunc) echo.HandlerFunc {
	if a.APIKey == "" {
		return next
	}
	want := sha256.Sum256([]byte(a.APIKey))
	return func(c echo.Context) error {
		if c.Request().Method == http.MethodOptions {
			return next(c)
		}
		h := c.Request().Header
		key, present := h.Get("X-API-Key"), len(h.Values("X-API-Key")) > 0
		if !present {
			if scheme, token, ok := strings.Cut(h.Get(echo.HeaderAuthorization), " "); ok && strings.EqualFold(scheme, "Bearer") {
				key = strings.TrimSpace(token)
			}
		}
		// Hashing first makes the comparison constant-time in the length too.
		got := sha256.Sum256([]byte(key))
		if key == "" || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, "Bearer")
			return newError(http.StatusUnauthorized, "unauthorized", "Missing or invalid API key")
		}
		return next(c)
	}
}
