package admin

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
)

// MessagePageSize is how many rows a page of the Messages page shows.
const MessagePageSize = 100

// shortError is how many characters of a message's error the list shows.
const shortError = 80

// MessageStatuses are the statuses the Messages page filters by: those
// GET /v1/messages?status= accepts.
var MessageStatuses = []string{"scheduled", "queued", "sending", "sent", "failed", "canceled"}

// ErrNotFound is what a MessageFunc returns for an unknown id.
var ErrNotFound = errors.New("admin: not found")

// MessageFilter is what the Messages page asks for: empty fields do not
// filter; Until is exclusive.
type MessageFilter struct {
	InboxID, Status string
	Since, Until    time.Time
	Limit, Offset   int
}

// MessageRow is a row of the Messages page.
type MessageRow struct {
	ID, InboxID, From, Subject, Status, Error string
	To                                        []string
	CreatedAt                                 time.Time
}

// FirstTo is the first To address, "" when none.
func (m MessageRow) FirstTo() string {
	if len(m.To) == 0 {
		return ""
	}
	return m.To[0]
}

// MoreTo is how many To addresses FirstTo leaves out.
func (m MessageRow) MoreTo() int { return max(0, len(m.To)-1) }

// ShortError is the start of Error, cut at shortError characters.
func (m MessageRow) ShortError() string {
	if utf8.RuneCountInString(m.Error) <= shortError {
		return m.Error
	}
	return string([]rune(m.Error)[:shortError]) + "…"
}

// MessageDetail is what a message's page shows: never its bodies or its
// attachments' content.
type MessageDetail struct {
	MessageRow
	ThreadID, MessageIDHeader, ProviderMessageID string
	Cc, Bcc                                      []string
	// Zero when not set.
	SentAt, ScheduledAt, NextAttempt time.Time
	Labels                           []string
	// Metadata is the metadata as JSON text, "" when none.
	Metadata    string
	Attachments []Attachment
	Recipients  []RecipientTimeline
	// Attempts counts the provider calls made for the message.
	Attempts int
	// Refusal is the throttle's refusal that queued the message, and
	// Admission its windows when its slot was settled; nil when none.
	Refusal, Admission *Decision
}

// Decision is what the throttle decided for a message.
type Decision struct {
	At time.Time
	// Cost is the units the send weighs in each window.
	Cost int
	// Full names the windows a refusal found full, and RetryAfter is the
	// Retry-After it gave, in seconds; empty for an admission.
	Full       []string
	RetryAfter int
	Windows    []Window
}

// Attachment is an attachment's name and size.
type Attachment struct {
	Filename, ContentType string
	Size                  int64
}

// RecipientTimeline is a recipient's delivery events, oldest first.
type RecipientTimeline struct {
	Email, State string
	Events       []DeliveryEvent
}

// DeliveryEvent is one event a provider reported; optional fields are ""
// when not given.
type DeliveryEvent struct {
	Type, Recipient, Provider, BounceType, SMTPStatus, Diagnostic string
	OccurredAt                                                    time.Time
}

type (
	// MessagesFunc reads the page of messages f selects, newest first.
	MessagesFunc func(ctx context.Context, f MessageFilter) ([]MessageRow, error)
	// MessageFunc reads one message; ErrNotFound when there is none.
	MessageFunc func(ctx context.Context, id string) (MessageDetail, error)
)

type messagesPage struct {
	chrome
	Filter   MessageFilter
	Since    string // as given, so the form shows it again
	Until    string
	Statuses []string
	Notes    []string
	Rows     []MessageRow
	Paging
}

// ShowMessages serves GET /admin/messages: the messages newest first,
// MessagePageSize a page, filtered by ?inbox_id=, ?status= and the
// creation times ?since= and ?until=. A filter value that cannot be one is
// ignored, with a note saying so. The page has no total: counting the
// matches would read every one of them.
func (h *Handler) ShowMessages(c echo.Context) error {
	off := offsetParam(c)
	p := messagesPage{chrome: h.chrome("Messages", "messages"), Statuses: MessageStatuses, Paging: Paging{Query: url.Values{}}}
	f := MessageFilter{InboxID: c.QueryParam("inbox_id"), Limit: MessagePageSize + 1, Offset: off}
	if f.InboxID != "" {
		p.Query.Set("inbox_id", f.InboxID)
	}
	if s := c.QueryParam("status"); s != "" {
		if slices.Contains(MessageStatuses, s) {
			f.Status = s
			p.Query.Set("status", s)
		} else {
			p.Notes = append(p.Notes, "Status "+s+" is not one of "+strings.Join(MessageStatuses, ", ")+"; it was ignored.")
		}
	}
	for _, tp := range []struct {
		name string
		end  bool
		t    *time.Time
		raw  *string
	}{{"since", false, &f.Since, &p.Since}, {"until", true, &f.Until, &p.Until}} {
		v := c.QueryParam(tp.name)
		if v == "" {
			continue
		}
		*tp.raw = v
		t, ok := parseWhen(v, tp.end)
		if !ok {
			p.Notes = append(p.Notes, "“"+v+"” is not a date (2006-01-02) or an RFC 3339 time; "+tp.name+" was ignored.")
			continue
		}
		*tp.t = t
		p.Query.Set(tp.name, v)
	}
	var rows []MessageRow
	if h.o.Messages != nil {
		var err error
		if rows, err = h.o.Messages(c.Request().Context(), f); err != nil {
			return err
		}
	}
	more := len(rows) > MessagePageSize
	p.Rows = rows[:min(len(rows), MessagePageSize)]
	q := p.Query
	p.Paging = paging(off, MessagePageSize, len(p.Rows), more, -1)
	p.Query = q
	p.Filter = f
	return h.render(c, http.StatusOK, "messages", p)
}

// parseWhen reads a filter's time: RFC 3339, or a date, which is its
// midnight UTC as a start and the next midnight as an end, so that
// until=2026-11-27 includes that day.
func parseWhen(v string, end bool) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, true
	}
	t, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, false
	}
	if end {
		t = t.AddDate(0, 0, 1)
	}
	return t, true
}

type messagePage struct {
	chrome
	M MessageDetail
}

type notFoundPage struct {
	chrome
	What string
}

// ShowMessage serves GET /admin/messages/{id}: one message and each
// recipient's delivery events; an HTML 404 for an unknown id.
func (h *Handler) ShowMessage(c echo.Context) error {
	id := c.Param("id")
	if h.o.Message == nil {
		return h.render(c, http.StatusNotFound, "notfound", notFoundPage{chrome: h.chrome("Not found", "messages"), What: "Message " + id})
	}
	m, err := h.o.Message(c.Request().Context(), id)
	if errors.Is(err, ErrNotFound) {
		return h.render(c, http.StatusNotFound, "notfound", notFoundPage{chrome: h.chrome("Not found", "messages"), What: "Message " + id})
	}
	if err != nil {
		return err
	}
	return h.render(c, http.StatusOK, "message", messagePage{chrome: h.chrome("Message", "messages"), M: m})
}
