package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
)

func (a *API) rateLimit(c echo.Context) error {
	st := a.Limiter.State(a.Now())
	return c.JSON(http.StatusOK, rateLimitResponse{
		PerMinute: toWindow(st.PerMinute),
		PerHour:   toWindow(st.PerHour),
	})
}

func toWindow(w skuld.WindowState) windowResponse {
	if w.Limit == 0 {
		return windowResponse{}
	}
	return windowResponse{Limit: w.Limit, Used: &w.Used, InFlight: &w.InFlight,
		Remaining: &w.Remaining, ResetSeconds: &w.ResetSeconds}
}

// setRateLimitHeaders describes the tighter configured window on a send
// response: the de-facto X-RateLimit-* headers and the IETF draft's
// RateLimit-Policy / RateLimit structured fields.
func (a *API) setRateLimitHeaders(c echo.Context) {
	now := a.Now()
	st := a.Limiter.State(now)
	type named struct {
		name   string
		window int
		skuld.WindowState
	}
	var configured []named
	if st.PerMinute.Limit > 0 {
		configured = append(configured, named{"per-minute", 60, st.PerMinute})
	}
	if st.PerHour.Limit > 0 {
		configured = append(configured, named{"per-hour", 3600, st.PerHour})
	}
	if len(configured) == 0 {
		return
	}
	tight := configured[0]
	policy := ""
	for i, w := range configured {
		if w.Remaining < tight.Remaining {
			tight = w
		}
		if i > 0 {
			policy += ", "
		}
		policy += fmt.Sprintf("%q;q=%d;w=%d", w.name, w.Limit, w.window)
	}
	h := c.Response().Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(tight.Limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(tight.Remaining))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(now.Unix()+int64(tight.ResetSeconds), 10))
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", tight.name, tight.Remaining, tight.ResetSeconds))
}
