package api

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
)

func (a *API) rateLimit(c echo.Context) error {
	st := a.Limiter.State(a.Clock.Mono())
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

// headerWindow is the window that a send response's rate-limit headers
// describe.
type headerWindow struct {
	name      string
	span      int // seconds
	limit     int
	remaining int
	reset     int // seconds until it has room again (or its oldest send leaves)
}

// setRateLimitHeaders writes the de-facto X-RateLimit-* headers and the IETF
// draft's RateLimit-Policy / RateLimit fields on a send response. On a 429
// they describe the violated window that frees last, so that every header
// agrees with Retry-After; otherwise the tighter configured window: the one
// with fewer sends remaining, and of two equally tight the one that frees
// later, which is the one a client must wait for.
func (a *API) setRateLimitHeaders(c echo.Context, refusal *skuld.RateLimitedError) {
	st := a.Limiter.State(a.Clock.Mono())
	var configured []headerWindow
	for _, w := range []struct {
		name string
		span int
		ws   skuld.WindowState
	}{{"per-minute", 60, st.PerMinute}, {"per-hour", 3600, st.PerHour}} {
		if w.ws.Limit > 0 {
			configured = append(configured, headerWindow{w.name, w.span, w.ws.Limit, w.ws.Remaining, w.ws.ResetSeconds})
		}
	}
	if len(configured) == 0 {
		return
	}
	var tight headerWindow
	if refusal != nil {
		v := refusal.Binding()
		reset := int(refusal.RetryAfter.Seconds())
		for _, w := range configured {
			if w.name == v.Window {
				tight = headerWindow{w.name, w.span, w.limit, 0, reset}
			}
		}
	} else {
		tight = configured[0]
		for _, w := range configured[1:] {
			if w.remaining < tight.remaining || (w.remaining == tight.remaining && w.reset > tight.reset) {
				tight = w
			}
		}
	}
	policy := ""
	for i, w := range configured {
		if i > 0 {
			policy += ", "
		}
		policy += fmt.Sprintf("%q;q=%d;w=%d", w.name, w.limit, w.span)
	}
	h := c.Response().Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(tight.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(tight.remaining))
	// Rounded up, like Retry-After: a client that comes back at the Unix
	// second named must not be early.
	now := a.Clock.Now().UnixNano()
	h.Set("X-RateLimit-Reset", strconv.FormatInt((now+int64(time.Second)-1)/int64(time.Second)+int64(tight.reset), 10))
	h.Set("RateLimit-Policy", policy)
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", tight.name, tight.remaining, tight.reset))
}
