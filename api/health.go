package api

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
)

// health answers as long as the process serves HTTP; it touches nothing.
func (a *API) health(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// ready answers 200 only when the database answers and its schema is the
// one this binary knows.
func (a *API) ready(c echo.Context) error {
	if err := a.Store.Ready(c.Request().Context()); err != nil {
		a.logger.WarnContext(c.Request().Context(), "not ready", slog.Any("error", err))
		return c.JSON(http.StatusServiceUnavailable, map[string]string{
			"status": "not_ready", "detail": "Database unreachable or schema not current"})
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
