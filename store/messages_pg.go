package store

import (
	"context"
	"strings"
	"time"

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
	body_html, size, created_at, sent_at, scheduled_at, next_attempt_at, version, throttle_refusal,
	throttle_admission, attempts)
	SELECT ` + strings.TrimSuffix(strings.Repeat("?, ", 20), ", ") +
	`, CAST(? AS bigint), CAST(? AS timestamptz), CAST(? AS timestamptz), CAST(? AS timestamptz),
	CAST(? AS timestamptz), CAST(? AS integer), CAST(? AS text), CAST(? AS text), CAST(? AS integer) FROM t`

// inboxLockCTE takes the inbox's row FOR KEY SHARE before anything else
// the statement writes: it waits for a deletion of the inbox that holds
// the row (FOR UPDATE, DeleteInbox) and then finds no row, and it keeps a
// deletion from starting until the send's slot is committed, where the
// deletion sees it. Taken first, it keeps the locks in the deletion's
// order (inbox, then threads): a reply's UPDATE of its thread before the
// message's foreign-key check would deadlock with the deletion's cascade.
const inboxLockCTE = `WITH i AS (SELECT 1 FROM inboxes WHERE id = ? FOR KEY SHARE), `

// inboxLocked is the condition that the inbox's row was locked (and so
// still exists).
const inboxLocked = `EXISTS (SELECT 1 FROM i) AND `

// The thread's CTE ends with a condition (guard): TRUE, or judgedGuard.
const newThreadCTE = `t AS (INSERT INTO threads (id, inbox_id, subject, summary,
	participant_hash, last_message_at, created_at) SELECT ?, ?, ?, ?, ?, CAST(? AS timestamptz),
	CAST(? AS timestamptz) WHERE `

// The reply's thread moves forward only: a message created earlier but
// committed later must not make the thread look older than it is.
const replyThreadCTE = `t AS (UPDATE threads SET last_message_at = GREATEST(last_message_at,
	CAST(? AS timestamptz)) WHERE id = ? AND `

// slotCTE writes the send's slot in the throttle's log, only if the thread
// was written (FROM t), like the message.
const slotCTE = `, l AS (INSERT INTO send_log (id, inbox_id, scope, reserved_at, deadline, counted_at, cost)
	SELECT ?, ?, ?, CAST(? AS timestamptz), CAST(? AS timestamptz), CAST(? AS timestamptz), CAST(? AS integer) FROM t) `

// createMessagePostgres writes a message without attachments, with its new
// thread or moving its existing one, and its slot, in ONE statement. A data-modifying CTE
// is atomic on its own, so the send path pays one round trip where the
// transaction pays four or five (BEGIN, INSERTs or UPDATE, COMMIT): on a
// busy server that is most of the database work of a send.
func (s *Store) createMessagePostgres(ctx context.Context, m *Message, newThread *Thread, slot *SendSlot) error {
	sql, vars := inboxLockCTE, []any{m.InboxID}
	if newThread != nil {
		sql += newThreadCTE
		t := newThread
		vars = append(vars, t.ID, t.InboxID, t.Subject, t.Summary, t.ParticipantHash, t.LastMessageAt, t.CreatedAt)
	} else {
		sql += replyThreadCTE
		vars = append(vars, m.CreatedAt, m.ThreadID)
	}
	sql += inboxLocked
	if s.judged(slot) {
		sql += judgedGuard
		vars = append(vars, judgedVars(slot.JudgedBy)...)
	} else {
		sql += "TRUE"
	}
	sql += " RETURNING id) "
	if slot != nil {
		sql += slotCTE
		vars = append(vars, slot.ID, slot.InboxID, slot.Scope, slot.ReservedAt, slot.Deadline, slot.CountedAt, slot.Cost)
	}
	sql += messageInsert
	vars = append(vars, m.ID, m.ThreadID, m.InboxID, m.Direction, m.Status, m.Error,
		m.ProviderMessageID, m.MessageIDHeader, m.InReplyTo, m.References, m.Subject, m.FromAddress,
		m.ToAddresses, m.CcAddresses, m.BccAddresses, m.ReplyToAddresses, m.Labels, m.Metadata, m.Text,
		m.HTML, m.Size, m.CreatedAt, m.SentAt, m.ScheduledAt, m.NextAttemptAt, m.Version, m.ThrottleRefusal,
		m.ThrottleAdmission, m.Attempts)
	res := s.db.WithContext(ctx).Exec(sql, vars...)
	switch {
	case res.Error != nil:
		return res.Error
	case res.RowsAffected == 1:
		return nil
	case s.judged(slot):
		return s.judgedFailed(ctx, slot.JudgedBy)
	}
	return gorm.ErrRecordNotFound // the reply's thread does not exist
}

// outcomePostgres records a send's outcome and settles its slot in ONE
// statement on db: the second durable commit of a send, like the first, is
// a single round trip. A data-modifying CTE runs even when the message is
// gone, so the slot is settled whatever happened to the inbox. held: the
// message is changed only if it is "sending", and a held status (put back,
// not taken) sets its next attempt too.
func outcomePostgres(db *gorm.DB, id string, o Outcome, sentAt, countedAt *time.Time, held bool) *gorm.DB {
	slot, slotVars, set, setVars := outcomeSQL(id, o, sentAt, countedAt, held, "")
	return db.Exec("WITH l AS ("+slot+") "+set, append(slotVars, setVars...)...)
}

// outcomeSQL is the two writes of an outcome, the slot's and the
// message's, each with its variables; both end with their WHERE clause, and
// then with guard, a condition more.
func outcomeSQL(id string, o Outcome, sentAt, countedAt *time.Time, held bool, guard string) (slot string, slotVars []any, set string, setVars []any) {
	slot, slotVars = `DELETE FROM send_log WHERE id = ?`+guard, []any{id}
	if countedAt != nil {
		slot = `UPDATE send_log SET counted_at = CAST(? AS timestamptz) WHERE id = ?` + guard
		slotVars = []any{*countedAt, id}
	}
	set = `UPDATE messages SET status = ?, provider_message_id = ?, error = ?, sent_at = CAST(? AS timestamptz), attempts = attempts + ?`
	setVars = []any{o.Status, o.ProviderMessageID, o.Error, sentAt, o.Attempts}
	if o.Admission != nil {
		set += `, throttle_admission = ?`
		setVars = append(setVars, *o.Admission)
	}
	if held && Held(o.Status) {
		set += `, next_attempt_at = CAST(? AS timestamptz)`
		setVars = append(setVars, utcPtr(o.NextAttemptAt))
	}
	set += ` WHERE id = ?`
	setVars = append(setVars, id)
	if held {
		set += ` AND status = ?`
		setVars = append(setVars, StatusSending)
	}
	return slot, slotVars, set + guard, setVars
}
