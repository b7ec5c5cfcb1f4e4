package admin

import (
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Overview is what the overview page shows, read by the api package.
type Overview struct {
	// Unit is what the throttle counts: "message" or "recipient".
	Unit   string
	Global []Window
	// Inboxes are the busiest inboxes' windows, busiest first.
	Inboxes []InboxWindows
	// Held is the held mail; nil when the server has no store of it.
	Held *Held
	// At is when the numbers were read.
	At time.Time
	// Activity is what the overview charts; nil: not shown.
	Activity *Activity
}

// Activity is what the overview charts: sends by minute and by hour, refusals by reason, and the reputation rates.
type Activity struct {
	Minutes []Bucket // the last 60 minutes, oldest first, one per minute (zero counts included)
	Hours   []Bucket // the last 168 hours, oldest first, one per hour
	// Refusals are the last 24 hours' refused sends by reason, in the order
	// RefusalReasons lists them, every reason present (0 allowed).
	Refusals []Refusal
	// Reputation is nil before any delivery event was stored.
	Reputation *Reputation
}

// Bucket is the sends of one minute or hour from Start.
type Bucket struct {
	Start        time.Time
	Sent, Failed int64
}

// Refusal is how many sends were refused for Reason, one of RefusalReasons.
type Refusal struct {
	Reason string
	Count  int64
}

// RefusalReasons: throttled (429), domain_blocked, suppressed, validation.
var RefusalReasons = []string{"throttled", "domain_blocked", "suppressed", "validation"}

// Reputation is what the bounce and complaint rates are computed from.
type Reputation struct {
	// Sent counts the messages sent in the last 24 hours (by the hour),
	// Bounced and Complained the hard bounces and complaints reported in
	// them: the rates SES reviews an account by.
	Sent, Bounced, Complained int64
}

// Bounce and complaint thresholds, useSend's: warn over 5 % and 0.1 %.
const BounceWarn, ComplaintWarn = 0.05, 0.001

// BounceRate is Bounced/Sent; 0 when nothing was sent.
func (r Reputation) BounceRate() float64 { return rate(r.Bounced, r.Sent) }

// ComplaintRate is Complained/Sent; 0 when nothing was sent.
func (r Reputation) ComplaintRate() float64 { return rate(r.Complained, r.Sent) }

func rate(n, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// Window is one throttle window's numbers.
type Window struct {
	Name         string // "per_minute", …
	Limit        int    // 0 = unlimited
	Used         int
	InFlight     int
	ResetSeconds int
}

// InboxWindows is one inbox and its windows.
type InboxWindows struct {
	ID, Address, Name string
	Windows           []Window
}

// Held is the held mail by status, and the oldest queued message's wait.
type Held struct {
	Scheduled, Queued int64
	// OldestQueued is when the longest-waiting queued message became due;
	// zero when none is queued.
	OldestQueued time.Time
}

// barWidth is the width of a window's bar, in SVG user units.
const barWidth = 200

// Bar is a window's bar: the widths of its used, in-flight and free parts.
type Bar struct {
	Used, InFlight, Free int
	InFlightX, FreeX     int
	Unlimited            bool
}

// bar draws w: each part's share of the limit, at least 1 unit when not
// zero so that one send in a large window still shows.
func bar(w Window) Bar {
	if w.Limit <= 0 {
		return Bar{Free: barWidth, Unlimited: true}
	}
	part := func(n int) int {
		if n <= 0 {
			return 0
		}
		return max(1, min(barWidth, n*barWidth/w.Limit))
	}
	b := Bar{Used: part(w.Used)}
	b.InFlight = min(part(w.InFlight), barWidth-b.Used)
	b.InFlightX = b.Used
	b.FreeX = b.Used + b.InFlight
	b.Free = barWidth - b.FreeX
	return b
}

// ratio is a window's numbers as text: "used/limit", ∞ when unlimited.
func ratio(w Window) string {
	if w.Limit <= 0 {
		return strconv.Itoa(w.Used) + "/∞"
	}
	return fmt.Sprintf("%d/%d", w.Used, w.Limit)
}

var funcs = template.FuncMap{
	"bar":   bar,
	"ratio": ratio,
	"seconds": func(s int) string {
		return (time.Duration(s) * time.Second).String()
	},
	"since": func(t, now time.Time) string {
		return now.Sub(t).Truncate(time.Second).String()
	},
	"resetAt": func(now time.Time, s int) string {
		return now.Add(time.Duration(s) * time.Second).UTC().Format(time.RFC3339)
	},
	"utc":          func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"nav":          func() []navItem { return nav },
	"pager":        func(path string, p Paging) pagerData { return pagerData{Path: path, P: p} },
	"scope":        func(at time.Time, ws []Window) windowsTable { return windowsTable{At: at, Windows: ws} },
	"minutesChart": minutesChart,
	"hoursChart":   hoursChart,
	"refusalLabel": refusalLabel,
	"rateRows":     rateRows,
}

// windowsTable is a scope's windows as one table draws them.
type windowsTable struct {
	At      time.Time
	Windows []Window
}

// overviewPage is the overview's template data.
type overviewPage struct {
	chrome
	Overview
}

// ShowOverview serves GET /admin.
func (h *Handler) ShowOverview(c echo.Context) error {
	ov, err := h.o.Overview(c.Request().Context())
	if err != nil {
		return err
	}
	if ov.At.IsZero() {
		ov.At = h.o.Now()
	}
	return h.render(c, http.StatusOK, "overview", overviewPage{chrome: h.chrome("Overview", "overview"),
		Overview: ov})
}

// ShowWindows serves GET /admin/windows: the overview's throttle windows
// alone, in the wrapper that the page's htmx swaps for them every 2 s.
func (h *Handler) ShowWindows(c echo.Context) error {
	read := h.o.Windows
	if read == nil {
		read = h.o.Overview
	}
	ov, err := read(c.Request().Context())
	if err != nil {
		return err
	}
	if ov.At.IsZero() {
		ov.At = h.o.Now()
	}
	return h.render(c, http.StatusOK, "throttle", ov)
}
