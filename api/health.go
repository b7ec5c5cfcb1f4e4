package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

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

// ready answers 200 only when the database answers and its schema is the
// one this binary knows; otherwise 503 naming the dependency and why.
func (a *API) ready(c echo.Context) error {
	err := a.Store.Ready(c.Request().Context())
	if err == nil {
		return c.JSON(http.StatusOK, readyResponse{Status: "ready", Checks: map[string]string{"database": "ok"}})
	}
	a.logger.WarnContext(c.Request().Context(), "not ready", slog.String("dependency", "database"), slog.Any("error", err))
	check, detail := "unreachable", "Database unreachable"
	if errors.Is(err, store.ErrSchemaNotCurrent) {
		check, detail = "schema_not_current", "Database schema is not current; run nornweave migrate"
	}
	return c.JSON(http.StatusServiceUnavailable, readyResponse{Status: "not_ready", Detail: &detail,
		Checks: map[string]string{"database": check}})
}
