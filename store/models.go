package store

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Message statuses. A message is written as StatusSending before the
// provider is called and moves to exactly one of the other two afterwards.
const (
	StatusSending = "sending"
	StatusSent    = "sent"
	StatusFailed  = "failed"
)

// DirectionOutbound is the only direction this server writes.
const DirectionOutbound = "outbound"

// Inbox is a row of the inboxes table: one sending address.
type Inbox struct {
	ID           string `gorm:"primaryKey"`
	EmailAddress string
	Name         string
	// RateLimitPerMinute and RateLimitPerHour override the inbox default
	// limits: nil is the default, 0 unlimited.
	RateLimitPerMinute *int
	RateLimitPerHour   *int
	CreatedAt          time.Time
	UpdatedAt          time.Time
	// Version is, on a database shared by several servers, the version of
	// the inboxes this copy was read at (see Store.CachedInbox); "" for a
	// copy read just now, or on one server's database.
	Version string `gorm:"-"`
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
	// Text is the Markdown body as sent (text/plain); HTML is the text/html
	// part as sent.
	Text      string `gorm:"column:body_text"`
	HTML      string `gorm:"column:body_html"`
	Labels    StringList
	Metadata  JSONObject
	Size      int
	CreatedAt time.Time
	SentAt    *time.Time
	// TextBytes and HTMLBytes are the bodies' sizes, read instead of the
	// bodies by Messages with OmitBodies; they are not columns.
	TextBytes int64 `gorm:"->;-:migration"`
	HTMLBytes int64 `gorm:"->;-:migration"`
}

// Attachment is a row of the attachments table. Only the description of a
// file is kept, not its content: the content went out with the message.
type Attachment struct {
	ID          string `gorm:"primaryKey"`
	MessageID   string
	Filename    string
	ContentType string
	Disposition string
	ContentID   *string
	Size        int
	CreatedAt   time.Time
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

// Scan implements sql.Scanner.
func (o *JSONObject) Scan(src any) error {
	b, err := textBytes(src)
	if err != nil || len(b) == 0 {
		*o = JSONObject{}
		return err
	}
	return json.Unmarshal(b, (*map[string]any)(o))
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
