package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// health answers as long as the process serves HTTP; it touches nothing.
// HEAD gets the same status and headers without the body.
func (a *API) health(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyResponse says, dependency by dependency, what is not ready.
type readyResponse struct {
	Status string            `json:"status"`
	Detail *string           `json:"detail"`
	Checks map[string]string `json:"checks"`
}

// readyTimeout bounds each dependency's answer to /ready.
const readyTimeout = 2 * time.Second

// ready answers 200 only when the database answers and its schema is the
// one this binary knows, the throttle's backend answers, and the job queue
// of held mail runs (when there is one); otherwise 503
// naming each dependency and why. A throttle backend that cannot be asked
// under THROTTLE_FAIL=open is reported but keeps the server ready: its
// sends go out unthrottled, as the operator chose.
func (a *API) ready(c echo.Context) error {
	ctx := c.Request().Context()
	checks, detail := map[string]string{"database": "ok", "throttle": "ok"}, ""
	dbCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	err := a.Store.Ready(dbCtx)
	cancel()
	if err != nil {
		a.logger.WarnContext(ctx, "not ready", slog.String("dependency", "database"), slog.Any("error", err))
		checks["database"], detail = "unreachable", "Database unreachable"
		if errors.Is(err, store.ErrSchemaNotCurrent) {
			checks["database"], detail = "schema_not_current", "Database schema is not current; run nornweave migrate"
		}
	}
	thCtx, cancel := context.WithTimeout(ctx, readyTimeout)
	_, err = a.Throttle.State(thCtx, "", throttle.Override{})
	cancel()
	if err != nil {
		a.logger.WarnContext(ctx, "throttle backend not answering", slog.Any("error", err))
		checks["throttle"] = "unreachable"
		if !a.ThrottleFailOpen && detail == "" {
			detail = "Send throttle backend unreachable; sends are refused (THROTTLE_FAIL=closed)"
		}
	}
	if a.Jobs != nil {
		checks["held_mail"] = "ok"
		if err := a.Jobs.Ready(); err != nil {
			a.logger.WarnContext(ctx, "not ready", slog.String("dependency", "held_mail"), slog.Any("error", err))
			checks["held_mail"] = "stopped"
			if detail == "" {
				detail = "The job queue of held mail is stopped; scheduled and queued mail is not sent"
			}
		}
	}
	if detail != "" {
		return c.JSON(http.StatusServiceUnavailable, readyResponse{Status: "not_ready", Detail: &detail, Checks: checks})
	}
	return c.JSON(http.StatusOK, readyResponse{Status: "ready", Checks: checks})
}
