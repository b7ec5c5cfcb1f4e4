package store

import (
	"context"
	"strings"

	"gorm.io/gorm"
)

// messageInsert is the tail of the one-statement insert: the message row,
// selected FROM the CTE "t" so that it is written only if the thread was.
// Non-text values are cast because a SELECT list gives parameters no type.
// The column list must follow the Message model; the round-trip test of
// every field on PostgreSQL catches a column added to one and not the other.
var messageInsert = `INSERT INTO messages (id, thread_id, inbox_id, direction, status, error,
	provider_message_id, message_id_header, in_reply_to, references_header, subject, from_address,
	to_addresses, cc_addresses, bcc_addresses, reply_to_addresses, labels, metadata, body_text,
	body_html, size, created_at, sent_at)
	SELECT ` + strings.TrimSuffix(strings.Repeat("?, ", 20), ", ") +
	`, CAST(? AS bigint), CAST(? AS timestamptz), CAST(? AS timestamptz) FROM t`

const newThreadCTE = `WITH t AS (INSERT INTO threads (id, inbox_id, subject, summary,
	participant_hash, last_message_at, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id) `

// The reply's thread moves forward only: a message created earlier but
// committed later must not make the thread look older than it is.
const replyThreadCTE = `WITH t AS (UPDATE threads SET last_message_at = GREATEST(last_message_at,
	CAST(? AS timestamptz)) WHERE id = ? RETURNING id) `

// createMessagePostgres writes a message without attachments, with its new
// thread or moving its existing one, in ONE statement. A data-modifying CTE
// is atomic on its own, so the send path pays one round trip where the
// transaction pays four or five (BEGIN, INSERTs or UPDATE, COMMIT): on a
// busy server that is most of the database work of a send.
func (s *Store) createMessagePostgres(ctx context.Context, m *Message, newThread *Thread) error {
	var sql string
	var vars []any
	if newThread != nil {
		sql = newThreadCTE + messageInsert
		t := newThread
		vars = []any{t.ID, t.InboxID, t.Subject, t.Summary, t.ParticipantHash, t.LastMessageAt, t.CreatedAt}
	} else {
		sql = replyThreadCTE + messageInsert
		vars = []any{m.CreatedAt, m.ThreadID}
	}
	vars = append(vars, m.ID, m.ThreadID, m.InboxID, m.Direction, m.Status, m.Error,
		m.ProviderMessageID, m.MessageIDHeader, m.InReplyTo, m.References, m.Subject, m.FromAddress,
		m.ToAddresses, m.CcAddresses, m.BccAddresses, m.ReplyToAddresses, m.Labels, m.Metadata, m.Text,
		m.HTML, m.Size, m.CreatedAt, m.SentAt)
	res := s.db.WithContext(ctx).Exec(sql, vars...)
	if res.Error == nil && res.RowsAffected == 0 {
		return gorm.ErrRecordNotFound // the reply's thread does not exist
	}
	return res.Error
}
