package admin

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
)

// Page sizes of the list pages.
const (
	HeldPageSize        = 200
	SuppressionPageSize = 100
	// DeliveriesShown is how many of an endpoint's latest attempts the
	// Webhooks page shows.
	DeliveriesShown = 20
)

// HeldMessage is a row of the Held page.
type HeldMessage struct {
	ID, InboxID, Status, Subject string
	Recipients                   int
	// ScheduledAt is a scheduled message's time; NextAttempt is when a
	// queued one is next expected to have room. Zero when not set.
	ScheduledAt, NextAttempt time.Time
}

// Suppression is a row of the Suppressions page.
type Suppression struct {
	Email, Reason, Source, MessageID string
	CreatedAt                        time.Time
}

// WebhookEndpoint is an endpoint on the Webhooks page: never its secret.
type WebhookEndpoint struct {
	ID, URL        string
	Events         []string
	Enabled        bool
	DisabledReason string
	FailingSince   time.Time // zero: not failing
	CreatedAt      time.Time
	// Deliveries are its latest attempts, newest first.
	Deliveries []WebhookDelivery
}

// WebhookDelivery is one delivery attempt.
type WebhookDelivery struct {
	EventType   string
	Attempt     int
	StatusCode  int // 0: no answer
	LatencyMS   int64
	Error       string
	NextRetryAt time.Time // zero: none
	At          time.Time
}

// Paging is a list page's place: its rows are From to To of Total (Total
// -1 when not counted), with the offsets of the pages around it; Prev or
// Next is -1 when there is none.
type Paging struct {
	From, To, Total int
	Prev, Next      int
	// Query is the page's other query parameters (a filter), kept by the
	// links.
	Query url.Values
}

// Link is the URL of the page at offset.
func (p Paging) Link(path string, offset int) string {
	q := url.Values{}
	for k, v := range p.Query {
		q[k] = v
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

func paging(offset, size, shown int, more bool, total int) Paging {
	p := Paging{From: offset + 1, To: offset + shown, Total: total, Prev: -1, Next: -1}
	if shown == 0 {
		p.From = offset
	}
	if offset > 0 {
		p.Prev = max(0, offset-size)
	}
	if more {
		p.Next = offset + size
	}
	return p
}

// offsetParam is ?offset=: a page's first row, 0 when absent or not a
// count. The pages are read-only and linked to each other, so a bad
// value shows the first page rather than an error.
func offsetParam(c echo.Context) int {
	n, err := strconv.Atoi(c.QueryParam("offset"))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// chrome is what every logged-in page's layout needs.
type chrome struct {
	Title    string
	LoggedIn bool
	// Page is the nav entry marked current: "overview", "held", ….
	Page string
}

func (h *Handler) chrome(title, page string) chrome {
	return chrome{Title: title, LoggedIn: h.o.APIKey != "", Page: page}
}

// InboxHeld is one inbox's held mail on the Held page.
type InboxHeld struct {
	InboxID  string
	Messages []HeldMessage
}

type heldPage struct {
	chrome
	Inboxes []InboxHeld
	Paging
}

// ShowHeld serves GET /admin/held: the held mail per inbox in lane order,
// HeldPageSize rows a page.
func (h *Handler) ShowHeld(c echo.Context) error {
	off := offsetParam(c)
	var ms []HeldMessage
	if h.o.Held != nil {
		var err error
		if ms, err = h.o.Held(c.Request().Context(), HeldPageSize+1, off); err != nil {
			return err
		}
	}
	more := len(ms) > HeldPageSize
	ms = ms[:min(len(ms), HeldPageSize)]
	p := heldPage{chrome: h.chrome("Held mail", "held"), Paging: paging(off, HeldPageSize, len(ms), more, -1)}
	for _, m := range ms {
		if n := len(p.Inboxes); n == 0 || p.Inboxes[n-1].InboxID != m.InboxID {
			p.Inboxes = append(p.Inboxes, InboxHeld{InboxID: m.InboxID})
		}
		last := &p.Inboxes[len(p.Inboxes)-1]
		last.Messages = append(last.Messages, m)
	}
	return h.render(c, http.StatusOK, "held", p)
}

// SuppressionReasons are the reasons the Suppressions page filters by.
var SuppressionReasons = []string{"bounce", "complaint", "manual"}

type suppressionsPage struct {
	chrome
	Reason  string
	Reasons []string
	Rows    []Suppression
	Paging
}

// ShowSuppressions serves GET /admin/suppressions: the list newest first,
// SuppressionPageSize a page, filtered by ?reason= when it is one of
// SuppressionReasons.
func (h *Handler) ShowSuppressions(c echo.Context) error {
	off := offsetParam(c)
	reason := c.QueryParam("reason")
	if !slices.Contains(SuppressionReasons, reason) {
		reason = ""
	}
	var rows []Suppression
	var total int64
	if h.o.Suppressions != nil {
		var err error
		if rows, total, err = h.o.Suppressions(c.Request().Context(), reason, SuppressionPageSize, off); err != nil {
			return err
		}
	}
	p := suppressionsPage{chrome: h.chrome("Suppressions", "suppressions"), Reason: reason,
		Reasons: SuppressionReasons, Rows: rows,
		Paging: paging(off, SuppressionPageSize, len(rows), int64(off+len(rows)) < total, int(total))}
	if reason != "" {
		p.Query = url.Values{"reason": {reason}}
	}
	return h.render(c, http.StatusOK, "suppressions", p)
}

type webhooksPage struct {
	chrome
	Endpoints []WebhookEndpoint
}

// ShowWebhooks serves GET /admin/webhooks: the endpoints and their latest
// attempts.
func (h *Handler) ShowWebhooks(c echo.Context) error {
	var es []WebhookEndpoint
	if h.o.Webhooks != nil {
		var err error
		if es, err = h.o.Webhooks(c.Request().Context()); err != nil {
			return err
		}
	}
	return h.render(c, http.StatusOK, "webhooks", webhooksPage{chrome: h.chrome("Webhooks", "webhooks"), Endpoints: es})
}

// Options funcs of the pages, declared here beside their view types; see
// Options.
type (
	// HeldFunc reads up to limit held messages from offset, grouped by
	// inbox in lane order.
	HeldFunc func(ctx context.Context, limit, offset int) ([]HeldMessage, error)
	// SuppressionsFunc reads a page of the list, newest first, and how
	// many match in all; reason "" is every reason.
	SuppressionsFunc func(ctx context.Context, reason string, limit, offset int) ([]Suppression, int64, error)
	// WebhooksFunc reads the endpoints, each with its latest
	// DeliveriesShown attempts.
	WebhooksFunc func(ctx context.Context) ([]WebhookEndpoint, error)
)

// navItem is an entry of the layout's nav.
type navItem struct{ Page, Path, Label string }

// nav is the layout's nav, in its order.
var nav = []navItem{
	{"overview", "/admin", "Overview"},
	{"messages", "/admin/messages", "Messages"},
	{"held", "/admin/held", "Held"},
	{"suppressions", "/admin/suppressions", "Suppressions"},
	{"webhooks", "/admin/webhooks", "Webhooks"},
}

// pagerData is a list's paging as the "paging" template draws it.
type pagerData struct {
	Path string
	P    Paging
}
