package api

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nornweave/nornweave/store"
)

// Timestamp renders as RFC 3339 in UTC with microseconds and "+00:00", the
// form the Python server emits, which every client's parser accepts.
type Timestamp time.Time

func (t Timestamp) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Time(t).UTC().Format("2006-01-02T15:04:05.000000+00:00") + `"`), nil
}

// UnmarshalJSON reads what MarshalJSON wrote (an answer read back, as the
// MCP tools read a send's).
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.Parse(time.RFC3339Nano, s)
	*t = Timestamp(v)
	return err
}

func optTime(t *time.Time) *Timestamp {
	if t == nil {
		return nil
	}
	ts := Timestamp(*t)
	return &ts
}

// List is the envelope of every list endpoint.
type List[T any] struct {
	Items []T `json:"items"`
	Count int `json:"count"`
}

type InboxResponse struct {
	ID             string         `json:"id"`
	EmailAddress   string         `json:"email_address"`
	Name           string         `json:"name"`
	ProviderConfig map[string]any `json:"provider_config"`
	// RateLimit is ours: the inbox's overrides of the inbox default
	// limits, null where it uses the default.
	RateLimit inboxRateLimit `json:"rate_limit"`
	CreatedAt Timestamp      `json:"created_at"`
}

type inboxRateLimit struct {
	PerMinute *int `json:"per_minute"`
	PerHour   *int `json:"per_hour"`
	PerDay    *int `json:"per_day"`
}

func toInbox(in *store.Inbox) InboxResponse {
	return InboxResponse{ID: in.ID, EmailAddress: in.EmailAddress, Name: in.Name,
		ProviderConfig: map[string]any{}, CreatedAt: Timestamp(in.CreatedAt),
		RateLimit: inboxRateLimit{PerMinute: in.RateLimitPerMinute, PerHour: in.RateLimitPerHour,
			PerDay: in.RateLimitPerDay}}
}

type ThreadSummary struct {
	ID              string    `json:"id"`
	InboxID         string    `json:"inbox_id"`
	Subject         string    `json:"subject"`
	Summary         *string   `json:"summary"`
	LastMessageAt   Timestamp `json:"last_message_at"`
	ParticipantHash string    `json:"participant_hash"`
	MessageCount    int       `json:"message_count"`
}

func toThreadSummary(t *store.Thread) ThreadSummary {
	return ThreadSummary{ID: t.ID, InboxID: t.InboxID, Subject: t.Subject, Summary: t.Summary,
		LastMessageAt: Timestamp(t.LastMessageAt), ParticipantHash: t.ParticipantHash,
		MessageCount: t.MessageCount}
}

// ThreadMessage is the conversation view an LLM consumes: outbound mail is
// the assistant speaking as the inbox.
type ThreadMessage struct {
	Role      string    `json:"role"`
	Author    string    `json:"author"`
	Content   string    `json:"content"`
	Timestamp Timestamp `json:"timestamp"`
}

type MessageResponse struct {
	ID                string         `json:"id"`
	ThreadID          string         `json:"thread_id"`
	InboxID           string         `json:"inbox_id"`
	Direction         string         `json:"direction"`
	ProviderMessageID *string        `json:"provider_message_id"`
	MessageIDHeader   string         `json:"message_id_header"`
	Status            string         `json:"status"`
	Error             *string        `json:"error"`
	Subject           string         `json:"subject"`
	FromAddress       string         `json:"from_address"`
	ToAddresses       []string       `json:"to_addresses"`
	CcAddresses       []string       `json:"cc_addresses"`
	BccAddresses      []string       `json:"bcc_addresses"`
	ReplyToAddresses  []string       `json:"reply_to_addresses"`
	Text              string         `json:"text"`
	HTML              string         `json:"html"`
	ContentClean      string         `json:"content_clean"`
	Timestamp         Timestamp      `json:"timestamp"`
	Labels            []string       `json:"labels"`
	Preview           string         `json:"preview"`
	Size              int            `json:"size"`
	InReplyTo         *string        `json:"in_reply_to"`
	References        []string       `json:"references"`
	Metadata          map[string]any `json:"metadata"`
	CreatedAt         Timestamp      `json:"created_at"`
	SentAt            *Timestamp     `json:"sent_at"`
	// ScheduledAt and NextAttemptAt are ours (issue 19): when a scheduled
	// message is due, and when a queued one's windows should have room.
	ScheduledAt   *Timestamp `json:"scheduled_at"`
	NextAttemptAt *Timestamp `json:"next_attempt_at"`
}

func ToMessage(m *store.Message) MessageResponse {
	ts := m.CreatedAt
	if m.SentAt != nil {
		ts = *m.SentAt
	}
	return MessageResponse{
		ID: m.ID, ThreadID: m.ThreadID, InboxID: m.InboxID, Direction: m.Direction,
		ProviderMessageID: m.ProviderMessageID, MessageIDHeader: m.MessageIDHeader,
		Status: m.Status, Error: m.Error, Subject: m.Subject, FromAddress: m.FromAddress,
		ToAddresses: nonNil(m.ToAddresses), CcAddresses: nonNil(m.CcAddresses),
		BccAddresses: nonNil(m.BccAddresses), ReplyToAddresses: nonNil(m.ReplyToAddresses),
		Text: m.Text, HTML: m.HTML, ContentClean: m.Text, Timestamp: Timestamp(ts),
		Labels: nonNil(m.Labels), Preview: preview(m.Text), Size: m.Size,
		InReplyTo: m.InReplyTo, References: nonNil(m.References), Metadata: nonNilMap(m.Metadata),
		CreatedAt: Timestamp(m.CreatedAt), SentAt: optTime(m.SentAt),
		ScheduledAt: optTime(m.ScheduledAt), NextAttemptAt: optTime(m.NextAttemptAt),
	}
}

// MessageDetail is GET /v1/messages/{id}: the message, the descriptions
// of its attachments, and each recipient's latest delivery state.
type MessageDetail struct {
	MessageResponse
	Attachments []AttachmentResponse `json:"attachments"`
	Recipients  []RecipientState     `json:"recipients"`
}

// sendResponse is the answer to POST /v1/messages.
type sendResponse struct {
	ID                string  `json:"id"`
	ThreadID          string  `json:"thread_id"`
	ProviderMessageID *string `json:"provider_message_id"`
	Status            string  `json:"status"`
	Error             *string `json:"error"`
	// ScheduledAt is set on a scheduled message (202), NextAttemptAt on a
	// queued one (202); both are null on a message sent at once (201).
	ScheduledAt   *Timestamp `json:"scheduled_at"`
	NextAttemptAt *Timestamp `json:"next_attempt_at"`
}

type SearchItem struct {
	ID           string         `json:"id"`
	ThreadID     string         `json:"thread_id"`
	InboxID      string         `json:"inbox_id"`
	Direction    string         `json:"direction"`
	ContentClean string         `json:"content_clean"`
	CreatedAt    Timestamp      `json:"created_at"`
	Metadata     map[string]any `json:"metadata"`
}

// WindowResponse is one throttle window. An unlimited window has limit 0,
// its counts, and null remaining and reset_seconds.
type WindowResponse struct {
	Limit        int  `json:"limit"`
	Used         *int `json:"used"`
	InFlight     *int `json:"in_flight"`
	Remaining    *int `json:"remaining"`
	ResetSeconds *int `json:"reset_seconds"`
}

// RateLimitResponse is a scope's windows, counted in Unit: "message", or
// "recipient" (THROTTLE_UNIT). An inbox has no per-second window.
type RateLimitResponse struct {
	Unit      string          `json:"unit"`
	PerSecond *WindowResponse `json:"per_second,omitempty"`
	PerMinute WindowResponse  `json:"per_minute"`
	PerHour   WindowResponse  `json:"per_hour"`
	PerDay    WindowResponse  `json:"per_day"`
}

// previewRunes is how much of the body a preview shows.
const previewRunes = 100

func preview(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(s) <= previewRunes {
		return s
	}
	return string([]rune(s)[:previewRunes])
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func nonNilMap(m map[string]any) map[string]any {
	if m == nil {
		return map[string]any{}
	}
	return m
}
