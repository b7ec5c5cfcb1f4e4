package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

func (a *API) rateLimit(c echo.Context) error {
	st, err := a.Limiter.State(c.Request().Context())
	if err != nil {
		return err
	}
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
	name      string // as in a 429's "violated", e.g. "inbox per-minute"
	span      int    // seconds
	limit     int
	remaining int
	reset     int // seconds until it has room again (or its oldest send leaves)
}

// seenWindows are the global and inbox windows a send's admission saw
// (skuld.SendRequest.Windows).
type seenWindows struct{ global, inbox skuld.State }

// configuredWindows lists the limited windows that apply to a send from
// in (nil for none): the global ones, then the inbox's. They are read from
// the throttle unless seen holds them already.
func (a *API) configuredWindows(c echo.Context, in *store.Inbox, seen *seenWindows) []headerWindow {
	ctx := c.Request().Context()
	type named struct {
		prefix string
		st     skuld.State
	}
	// A throttle backend that cannot be asked leaves the headers out of
	// an answer decided without them (a 503, or a send under
	// THROTTLE_FAIL=open).
	var sets []named
	if in != nil && seen != nil {
		sets = []named{{"", seen.global}, {"inbox ", seen.inbox}}
	} else if in != nil {
		g, is, err := a.Limiter.States(ctx, in.ID, skuld.InboxOverride(in))
		if err != nil {
			return nil
		}
		sets = []named{{"", g}, {"inbox ", is}}
	} else {
		st, err := a.Limiter.State(ctx)
		if err != nil {
			return nil
		}
		sets = []named{{"", st}}
	}
	var out []headerWindow
	for _, set := range sets {
		for _, w := range []struct {
			name string
			span int
			ws   skuld.WindowState
		}{{"per-minute", 60, set.st.PerMinute}, {"per-hour", 3600, set.st.PerHour}} {
			if w.ws.Limit > 0 {
				out = append(out, headerWindow{set.prefix + w.name, w.span, w.ws.Limit, w.ws.Remaining, w.ws.ResetSeconds})
			}
		}
	}
	return out
}

// setRateLimitHeaders writes the de-facto X-RateLimit-* headers and the IETF
// draft's RateLimit-Policy / RateLimit fields on a send response, over the
// global windows and those of the sending inbox. On a 429 they describe the
// violated window that frees last, so that every header agrees with
// Retry-After; otherwise the tightest window: the one with fewest sends
// remaining, and of two equally tight the one that frees later, which is the
// one a client must wait for.
func (a *API) setRateLimitHeaders(c echo.Context, refusal *skuld.RateLimitedError, in *store.Inbox, seen *seenWindows) {
	configured := a.configuredWindows(c, in, seen)
	if len(configured) == 0 && refusal == nil {
		return
	}
	var tight headerWindow
	if refusal != nil {
		v := refusal.Binding()
		tight = headerWindow{name: v.Window, span: 60, limit: v.Limit, reset: int(refusal.RetryAfter.Seconds())}
		if strings.HasSuffix(v.Window, "per-hour") {
			tight.span = 3600
		}
	} else {
		tight = configured[0]
		for _, w := range configured[1:] {
			if w.remaining < tight.remaining || (w.remaining == tight.remaining && w.reset > tight.reset) {
				tight = w
			}
		}
	}
	policy := make([]string, len(configured))
	for i, w := range configured {
		policy[i] = fmt.Sprintf("%q;q=%d;w=%d", policyName(w.name), w.limit, w.span)
	}
	h := c.Response().Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(tight.limit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(tight.remaining))
	// Rounded up, like Retry-After: a client that comes back at the Unix
	// second named must not be early.
	now := a.Clock.Now().UnixNano()
	h.Set("X-RateLimit-Reset", strconv.FormatInt((now+int64(time.Second)-1)/int64(time.Second)+int64(tight.reset), 10))
	if len(policy) > 0 {
		h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	}
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", policyName(tight.name), tight.remaining, tight.reset))
}

// policyName is a window's name as a structured-field key: "inbox-per-minute".
func policyName(window string) string { return strings.ReplaceAll(window, " ", "-") }
