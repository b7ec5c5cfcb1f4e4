package api

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

func (a *API) rateLimit(c echo.Context) error {
	snap, err := a.WindowsOf(c.Request().Context(), "")
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a.ToRateLimit(snap.Global, true))
}

// WindowsOf reads the throttle's windows: the global ones and, when
// inboxID is not empty, that inbox's, with its own limits.
func (a *API) WindowsOf(ctx context.Context, inboxID string) (throttle.Snapshot, error) {
	var in *store.Inbox
	if inboxID != "" {
		var err error
		if in, err = a.inbox(ctx, inboxID); err != nil {
			return throttle.Snapshot{}, err
		}
	}
	return a.readWindowsOf(ctx, in)
}

// ToRateLimit is a scope's windows as the rate-limit endpoints show them;
// global says whether the scope has a per-second window.
func (a *API) ToRateLimit(p throttle.ScopeState, global bool) RateLimitResponse {
	out := RateLimitResponse{Unit: a.Unit.String(), PerMinute: toWindow(p.PerMinute),
		PerHour: toWindow(p.PerHour), PerDay: toWindow(p.PerDay)}
	if global {
		sec := toWindow(p.PerSecond)
		out.PerSecond = &sec
	}
	return out
}

// toWindow is a window as the rate-limit endpoints show it. An unlimited
// window (limit 0) shows its counts too, as the metrics do, but no
// remaining or reset: null there, as the contract has it, so a client
// that reads a null remaining as "unlimited" stays right.
func toWindow(w throttle.WindowState) WindowResponse {
	out := WindowResponse{Limit: w.Limit, Used: &w.Used, InFlight: &w.InFlight}
	if w.Limit > 0 {
		out.Remaining, out.ResetSeconds = &w.Remaining, &w.ResetSeconds
	}
	return out
}

// setRateLimitHeaders writes the de-facto X-RateLimit-* headers and the IETF
// draft's RateLimit-Policy / RateLimit fields of a send's answer, from snap
// (the windows the send's admission saw, the refusal's, or a read). They
// list every limited window that applies to the send — the global ones and
// the sending inbox's — and describe one: on a refusal, the violated window
// that frees last, so that every header agrees with Retry-After; otherwise
// the tightest window: the one with fewest sends remaining, and of two
// equally tight the one that frees later, the one a client must wait for.
func (a *API) setRateLimitHeaders(h http.Header, snap throttle.Snapshot, refusal *throttle.RateLimitedError) {
	tight, limited, ok := TightWindow(snap, refusal)
	if !ok {
		return
	}
	policy := make([]string, len(limited))
	for i, w := range limited {
		policy[i] = fmt.Sprintf("%q;q=%d;w=%d", w.Window, w.Limit, int(w.Window.Span.Duration()/time.Second))
	}
	h.Set("X-RateLimit-Limit", strconv.Itoa(tight.Limit))
	// What the numbers count: message, or recipient (THROTTLE_UNIT).
	h.Set("X-RateLimit-Unit", a.Unit.String())
	h.Set("X-RateLimit-Remaining", strconv.Itoa(tight.Remaining))
	// Rounded up, like Retry-After: a client that comes back at the Unix
	// second named must not be early.
	now := a.Clock.Now().UnixNano()
	h.Set("X-RateLimit-Reset", strconv.FormatInt((now+int64(time.Second)-1)/int64(time.Second)+int64(tight.ResetSeconds), 10))
	if len(policy) > 0 {
		h.Set("RateLimit-Policy", strings.Join(policy, ", "))
	}
	h.Set("RateLimit", fmt.Sprintf("%q;r=%d;t=%d", tight.Window, tight.Remaining, tight.ResetSeconds))
}

// TightWindow is the window a send's answer describes (see
// setRateLimitHeaders), with every limited window of snap; ok is false when
// no window is limited and nothing was refused.
func TightWindow(snap throttle.Snapshot, refusal *throttle.RateLimitedError) (tight throttle.WindowState, limited []throttle.WindowState, ok bool) {
	for _, w := range snap.States() {
		if w.Limit > 0 {
			limited = append(limited, w)
		}
	}
	if len(limited) == 0 && refusal == nil {
		return tight, nil, false
	}
	if refusal != nil {
		v := refusal.Binding()
		// Remaining is what is left, which a send of several recipients
		// may find too little; the reset is when its whole cost fits.
		return throttle.WindowState{Window: v.Window, Limit: v.Limit, Remaining: max(v.Limit-v.Count, 0),
			ResetSeconds: refusal.RetryAfterSeconds()}, limited, true
	}
	tight = limited[0]
	for _, w := range limited[1:] {
		if w.Remaining < tight.Remaining || (w.Remaining == tight.Remaining && w.ResetSeconds > tight.ResetSeconds) {
			tight = w
		}
	}
	return tight, limited, true
}

// readWindows reads the windows that apply to a send from in (nil: the
// global ones only) for an answer decided without the throttle (a 422, a
// replay). A throttle that cannot be asked leaves them out.
func (a *API) readWindows(ctx context.Context, in *store.Inbox) (throttle.Snapshot, bool) {
	snap, err := a.readWindowsOf(ctx, in)
	return snap, err == nil
}

// readWindowsOf reads the windows that apply to a send from in (nil: the
// global ones only).
func (a *API) readWindowsOf(ctx context.Context, in *store.Inbox) (throttle.Snapshot, error) {
	key, o := "", throttle.Override{}
	if in != nil {
		key, o = skuld.InboxKey(in), skuld.InboxOverride(in)
	}
	return a.Throttle.State(ctx, key, o)
}
