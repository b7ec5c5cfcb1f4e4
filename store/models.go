package store

import (
	"bytes"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Message statuses. A message is written as StatusSending before the
// provider is called and moves to exactly one of StatusSent and
// StatusFailed afterwards. A held message (issue 19) is written first as
// StatusScheduled or StatusQueued and becomes StatusSending when it is
// dispatched, or StatusCanceled (or StatusFailed, expired or blocked)
// without ever being sent.
const (
	StatusScheduled = "scheduled"
	StatusQueued    = "queued"
	StatusSending   = "sending"
	StatusSent      = "sent"
	StatusFailed    = "failed"
	StatusCanceled  = "canceled"
)

// Held reports whether status is one of a message not yet dispatched,
// which its sender may still cancel or reschedule.
func Held(status string) bool { return status == StatusScheduled || status == StatusQueued }

// DirectionOutbound is the only direction this server writes.
const DirectionOutbound = "outbound"

// Inbox is a row of the inboxes table: one sending address.
type Inbox struct {
	ID           string `gorm:"primaryKey"`
	EmailAddress string
	Name         string
	// RateLimitPerMinute, RateLimitPerHour and RateLimitPerDay override
	// the inbox default limits: nil is the default, 0 unlimited.
	RateLimitPerMinute *int
	RateLimitPerHour   *int
	RateLimitPerDay    *int
	CreatedAt          time.Time
	UpdatedAt          time.Time
}

// Thread is a row of the threads table: a conversation inside one inbox.
type Thread struct {
	ID              string `gorm:"primaryKey"`
	InboxID         string
	Subject         string
	Summary         *string
	ParticipantHash string
	LastMessageAt   time.Time
	CreatedAt       time.Time
	// MessageCount is computed by the queries that list threads; it is not
	// a column.
	MessageCount int `gorm:"->;-:migration"`
}

// Message is a row of the messages table: one outbound email and its fate.
type Message struct {
	ID                string `gorm:"primaryKey"`
	ThreadID          string
	InboxID           string
	Direction         string
	Status            string
	Error             *string
	ProviderMessageID *string
	// MessageIDHeader is the Message-ID we generated, angle brackets included.
	MessageIDHeader  string
	InReplyTo        *string
	References       StringList `gorm:"column:references_header"`
	Subject          string
	FromAddress      string
	ToAddresses      StringList
	CcAddresses      StringList
	BccAddresses     StringList
	ReplyToAddresses StringList
	// Text is the text/plain part as sent: the Markdown body, or the text
	// derived from the HTML when only HTML was given; HTML is the
	// text/html part as sent.
	Text      string `gorm:"column:body_text"`
	HTML      string `gorm:"column:body_html"`
	Labels    StringList
	Metadata  JSONObject
	Size      int
	CreatedAt time.Time
	SentAt    *time.Time
	// ScheduledAt is when a scheduled message is due; NextAttemptAt is
	// when a queued one's windows are next expected to have room. Both are
	// nil for a message sent at once.
	ScheduledAt   *time.Time
	NextAttemptAt *time.Time
	// Version counts a held message's changes: 1 when accepted held, one
	// more for each reschedule, cancel, queueing and claim; 0 for a
	// message never held. A dispatch claims only the version it read.
	Version int
	// ThrottleRefusal is the refusal that queued the send, and
	// ThrottleAdmission the windows when its slot was settled: JSON
	// (skuld.Decision), nil when there was none. Attempts counts the
	// provider calls made for it.
	ThrottleRefusal   *string
	ThrottleAdmission *string
	Attempts          int
	// TextBytes and HTMLBytes are the bodies' sizes, read instead of the
	// bodies by Messages with OmitBodies; they are not columns.
	TextBytes int64 `gorm:"->;-:migration"`
	HTMLBytes int64 `gorm:"->;-:migration"`
}

// Attachment is a row of the attachments table: a file sent with a
// message, its description and (from migration 0009) its content.
type Attachment struct {
	ID        string `gorm:"primaryKey"`
	MessageID string
	// InboxID and ThreadID are the message's, and Position the
	// attachment's place in it (from 0); CreateMessage sets all three.
	InboxID     string
	ThreadID    string
	Position    int
	Filename    string
	ContentType string
	Disposition string
	ContentID   *string
	Size        int
	// ContentHash is the SHA-256 of Content in hex; nil for an attachment
	// sent before contents were kept, which has none.
	ContentHash *string
	// Content is written with the row and never read back into it: a
	// description is read without it (it can be 25 MB), and
	// AttachmentContent reads it alone.
	Content   []byte `gorm:"->:false;<-:create"`
	CreatedAt time.Time
}

// StringList is a list of strings kept as a JSON array in a text column, so
// that PostgreSQL and SQLite store it the same way.
type StringList []string

// Value implements driver.Valuer.
func (l StringList) Value() (driver.Value, error) {
	if l == nil {
		return "[]", nil
	}
	b, err := json.Marshal([]string(l))
	return string(b), err
}

// Scan implements sql.Scanner.
func (l *StringList) Scan(src any) error {
	b, err := textBytes(src)
	if err != nil || len(b) == 0 {
		*l = StringList{}
		return err
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// JSONObject is a JSON object kept in a text column.
type JSONObject map[string]any

// Value implements driver.Valuer.
func (o JSONObject) Value() (driver.Value, error) {
	if o == nil {
		return "{}", nil
	}
	b, err := json.Marshal(map[string]any(o))
	return string(b), err
}

// Scan implements sql.Scanner. Numbers come back as json.Number, digit
// for digit as they were stored: a client's 20-digit order id must not
// come back as a rounded float64.
func (o *JSONObject) Scan(src any) error {
	b, err := textBytes(src)
	if err != nil || len(b) == 0 {
		*o = JSONObject{}
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode((*map[string]any)(o))
}

func textBytes(src any) ([]byte, error) {
	switch v := src.(type) {
	case nil:
		return nil, nil
	case []byte:
		return v, nil
	case string:
		return []byte(v), nil
	default:
		return nil, fmt.Errorf("store: cannot scan %T into a JSON column", src)
	}
}
