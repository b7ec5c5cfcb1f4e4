package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"

	"gorm.io/gorm"
)

// attachmentColumns is an attachment's description: every column but the
// content, which a listing must never read.
const attachmentColumns = "id, message_id, inbox_id, thread_id, position, filename, content_type, " +
	"disposition, content_id, size, content_hash, created_at"

// AttachmentFilter selects attachments for Attachments. Set one of
// MessageID, ThreadID and InboxID (several apply together); it decides the
// order. Limit <= 0 means no limit.
type AttachmentFilter struct {
	// MessageID lists a message's attachments in the order they were sent.
	MessageID string
	// ThreadID lists a thread's attachments oldest first, as the
	// conversation reads.
	ThreadID string
	// InboxID lists an inbox's attachments newest first.
	InboxID string
	Limit   int
	Offset  int
}

// Attachment returns the description of the attachment with the given id
// (Content is not read), or ErrNotFound.
func (s *Store) Attachment(ctx context.Context, id string) (*Attachment, error) {
	if !isText(id) {
		return nil, notText("attachment", id)
	}
	var a Attachment
	err := s.db.WithContext(ctx).Select(attachmentColumns).Where("id = ?", id).Take(&a).Error
	if err != nil {
		return nil, wrap(err, "attachment %s", id)
	}
	return &a, nil
}

// Attachments returns a page of the descriptions of the attachments f
// selects (Content is not read). Unknown ids select nothing; that is not
// an error here.
func (s *Store) Attachments(ctx context.Context, f AttachmentFilter) ([]Attachment, error) {
	atts := []Attachment{}
	if !isText(f.MessageID) || !isText(f.ThreadID) || !isText(f.InboxID) {
		return atts, nil
	}
	q := s.db.WithContext(ctx).Select(attachmentColumns)
	if f.MessageID != "" {
		q = q.Where("message_id = ?", f.MessageID)
	}
	if f.ThreadID != "" {
		q = q.Where("thread_id = ?", f.ThreadID)
	}
	if f.InboxID != "" {
		q = q.Where("inbox_id = ?", f.InboxID)
	}
	// A message's attachments share its created_at; message_id keeps
	// each message's together, position orders them.
	switch {
	case f.MessageID != "":
		q = q.Order("position, id")
	case f.ThreadID != "":
		q = q.Order("created_at, message_id, position")
	default:
		q = q.Order("created_at DESC, message_id DESC, position")
	}
	if err := q.Limit(noLimit(f.Limit)).Offset(f.Offset).Find(&atts).Error; err != nil {
		return nil, wrap(err, "list attachments")
	}
	return atts, nil
}

// AttachmentContent returns the content of the attachment with the given
// id, or ErrNotFound if there is no such attachment or it has no content
// (it was sent before contents were kept).
func (s *Store) AttachmentContent(ctx context.Context, id string) ([]byte, error) {
	if !isText(id) {
		return nil, wrap(gorm.ErrRecordNotFound, "content of attachment %q", id)
	}
	var content []byte
	err := s.db.WithContext(ctx).Connection(func(conn *gorm.DB) error {
		err := conn.Model(&Attachment{}).Select("content").Where("id = ?", id).Row().Scan(&content)
		if err != nil {
			return err
		}
		return s.releaseConnBuffers(conn)
	})
	if errors.Is(err, sql.ErrNoRows) || (err == nil && content == nil) {
		err = gorm.ErrRecordNotFound
	}
	if err != nil {
		return nil, wrap(err, "content of attachment %s", id)
	}
	return content, nil
}

// releaseConnBuffers makes the connection of db give back, on
// PostgreSQL, the memory of the statements just run, which pgx keeps on
// the connection for as long as it idles in the pool (up to 20 of them):
// the read buffer of its last answer until its next statement, and the
// encoded arguments of its last statement until one with more arguments
// than its argument list's capacity (its ExtendedQueryBuilder resets the
// list's length to 0 but keeps up to 64 slots, each still pointing into
// the buffer that holds every argument of the statement). After a content
// of megabytes went by, a statement of releaseArgs arguments gives both
// back. SQLite keeps nothing of the kind.
func (s *Store) releaseConnBuffers(db *gorm.DB) error {
	if s.driver != DriverPostgres {
		return nil
	}
	args := make([]any, releaseArgs)
	for i := range args {
		args[i] = 0
	}
	var n int
	return db.Raw(releaseSQL, args...).Scan(&n).Error
}

// releaseArgs is one more than the argument slots pgx keeps (64).
const releaseArgs = 65

var releaseSQL = "SELECT num_nulls(" + strings.TrimSuffix(strings.Repeat("CAST(? AS integer), ", releaseArgs), ", ") + ")"
