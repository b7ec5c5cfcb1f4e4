package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
)

// CreateMessage writes, in one transaction, newThread (if non-nil), m, its
// attachments with their content, the send's slot in the throttle's log
// (if slot is non-nil; its ID and InboxID are m's), and moves the thread's
// last_message_at forward to m.CreatedAt. Either all of it is stored or none.
// With slot.JudgedBy on a shared database, none is if the inbox no longer
// reads as that copy (ErrInboxChanged, or ErrNotFound if it is gone).
//
// The arguments are completed in place with what is stored: empty ids get
// new UUIDs (m.ThreadID defaults to newThread.ID), a zero m.CreatedAt
// becomes now, the thread's and attachments' zero times become
// m.CreatedAt, attachments take m's ids and their place in atts, an empty
// Direction is outbound and an empty Status is sending; all times are
// normalized to UTC microseconds. A missing inbox or thread gives
// ErrNotFound.
func (s *Store) CreateMessage(ctx context.Context, m *Message, atts []Attachment, newThread *Thread, slot *SendSlot) error {
	s.prepareCreate(m, atts, newThread, slot)
	if s.driver == DriverPostgres && len(atts) == 0 {
		err := s.createMessagePostgres(ctx, m, newThread, slot)
		return wrap(err, "create message %s in thread %s", m.ID, m.ThreadID)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if s.judged(slot) {
			var still bool
			if err := tx.Raw("SELECT "+judgedGuard, judgedVars(slot.JudgedBy)...).Scan(&still).Error; err != nil || !still {
				return cmp.Or(err, errJudgedStale)
			}
		}
		return s.insertMessage(tx, m, atts, newThread, slot)
	})
	if errors.Is(err, errJudgedStale) {
		err = s.judgedFailed(ctx, slot.JudgedBy)
	}
	return wrap(err, "create message %s in thread %s", m.ID, m.ThreadID)
}

// judged says whether a send's record must check the copy of the inbox it
// was judged by: only on a shared database, where the copy may be out of
// date.
func (s *Store) judged(slot *SendSlot) bool {
	return slot != nil && slot.JudgedBy != nil && s.shared.Load()
}

// errJudgedStale stops the transaction of a send whose copy of its inbox
// is no longer true.
var errJudgedStale = errors.New("store: the send's copy of its inbox is out of date")

// insertMessage is CreateMessage's writes inside tx; the arguments are
// prepared.
func (s *Store) insertMessage(tx *gorm.DB, m *Message, atts []Attachment, newThread *Thread, slot *SendSlot) error {
	if newThread != nil {
		if err := tx.Create(newThread).Error; err != nil {
			return err
		}
	}
	if err := tx.Create(m).Error; err != nil {
		return err
	}
	if slot != nil {
		if err := tx.Create(slot).Error; err != nil {
			return err
		}
	}
	if len(atts) > 0 {
		if err := tx.Create(&atts).Error; err != nil {
			return err
		}
		if err := s.releaseConnBuffers(tx); err != nil {
			return err
		}
	}
	if newThread != nil && newThread.ID == m.ThreadID && !newThread.LastMessageAt.Before(m.CreatedAt) {
		// The thread was written just above with this message's time:
		// on PostgreSQL the UPDATE would be one more round trip per send.
		return nil
	}
	// Only forward: a message created earlier but committed later must
	// not make the thread look older than it is.
	res := tx.Model(&Thread{}).Where("id = ?", m.ThreadID).Update("last_message_at",
		gorm.Expr("CASE WHEN last_message_at < ? THEN ? ELSE last_message_at END", m.CreatedAt, m.CreatedAt))
	if res.Error == nil && res.RowsAffected == 0 {
		return gorm.ErrRecordNotFound
	}
	return res.Error
}

// prepareCreate completes CreateMessage's arguments as it documents.
func (s *Store) prepareCreate(m *Message, atts []Attachment, newThread *Thread, slot *SendSlot) {
	prepareMessage(m, s.db.NowFunc)
	if slot != nil {
		prepareSlot(slot, m)
	}
	if newThread != nil {
		newID(&newThread.ID)
		if m.ThreadID == "" {
			m.ThreadID = newThread.ID
		}
		newThread.CreatedAt = utc(orTime(newThread.CreatedAt, m.CreatedAt))
		newThread.LastMessageAt = utc(orTime(newThread.LastMessageAt, m.CreatedAt))
	}
	for i := range atts {
		a := &atts[i]
		newID(&a.ID)
		a.MessageID, a.InboxID, a.ThreadID, a.Position = m.ID, m.InboxID, m.ThreadID, i
		a.CreatedAt = utc(orTime(a.CreatedAt, m.CreatedAt))
	}
}

// prepareMessage completes m as CreateMessage documents.
func prepareMessage(m *Message, now func() time.Time) {
	newID(&m.ID)
	if m.CreatedAt.IsZero() {
		m.CreatedAt = now()
	}
	m.CreatedAt = utc(m.CreatedAt)
	m.SentAt, m.ScheduledAt, m.NextAttemptAt = utcPtr(m.SentAt), utcPtr(m.ScheduledAt), utcPtr(m.NextAttemptAt)
	if m.Direction == "" {
		m.Direction = DirectionOutbound
	}
	if m.Status == "" {
		m.Status = StatusSending
	}
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := utc(*t)
	return &u
}

func orTime(t, fallback time.Time) time.Time {
	if t.IsZero() {
		return fallback
	}
	return t
}

// Outcome is what became of a send, recorded by UpdateMessageOutcome.
type Outcome struct {
	Status            string
	ProviderMessageID *string
	Error             *string
	SentAt            *time.Time
	// NextAttemptAt is, for a dispatched message put back (a held
	// status, by FinishHeld), when it is next expected to go, if known.
	NextAttemptAt *time.Time
	// CountedAt, when set, marks the send's slot in the throttle's log
	// counted from then: it went out, or may have. Nil removes the slot:
	// the send certainly failed and counts nothing.
	CountedAt *time.Time
	// Admission, when set, is the throttle's windows at the settlement
	// (JSON), written to throttle_admission; Attempts, the provider calls
	// made, added to the message's.
	Admission *string
	Attempts  int
}

// UpdateMessageOutcome records the outcome of sending message id, and
// settles its slot in the throttle's log, in one statement or transaction.
// Every field of o is written, nil ones as NULL. It returns ErrNotFound if
// there is no such message (its inbox was deleted meanwhile); the slot is
// settled even then.
func (s *Store) UpdateMessageOutcome(ctx context.Context, id string, o Outcome) error {
	switch o.Status {
	case StatusSending, StatusSent, StatusFailed:
	default:
		return fmt.Errorf("store: update message %s: unknown status %q", id, o.Status)
	}
	var affected int64
	write := func(db *gorm.DB) (err error) {
		affected, err = s.writeOutcome(db, id, o, false)
		return err
	}
	var err error
	if s.driver == DriverPostgres {
		err = write(s.db.WithContext(ctx)) // one statement
	} else {
		err = s.db.WithContext(ctx).Transaction(write)
	}
	if err == nil && affected == 0 {
		return wrap(gorm.ErrRecordNotFound, "update message %s", id)
	}
	return wrap(err, "update message %s", id)
}

// writeOutcome records o for message id and settles its slot on db: one
// statement on PostgreSQL (outcomePostgres), two on SQLite, where db must
// be a transaction's. held: as for outcomePostgres. It returns how many
// messages it changed.
func (s *Store) writeOutcome(db *gorm.DB, id string, o Outcome, held bool) (int64, error) {
	sentAt, countedAt := utcPtr(o.SentAt), utcPtr(o.CountedAt)
	if s.driver == DriverPostgres {
		res := outcomePostgres(db, id, o, sentAt, countedAt, held)
		return res.RowsAffected, res.Error
	}
	if err := settleSlot(db, id, countedAt).Error; err != nil {
		return 0, err
	}
	updates := map[string]any{"status": o.Status, "provider_message_id": o.ProviderMessageID,
		"error": o.Error, "sent_at": sentAt, "attempts": gorm.Expr("attempts + ?", o.Attempts)}
	if o.Admission != nil {
		updates["throttle_admission"] = o.Admission
	}
	msg := db.Model(&Message{}).Where("id = ?", id)
	if held {
		if Held(o.Status) {
			updates["next_attempt_at"] = utcPtr(o.NextAttemptAt)
		}
		msg = msg.Where("status = ?", StatusSending)
	}
	res := msg.Updates(updates)
	return res.RowsAffected, res.Error
}

// settleSlot marks a send's slot counted at countedAt, or deletes it.
func settleSlot(tx *gorm.DB, id string, countedAt *time.Time) *gorm.DB {
	if countedAt == nil {
		return tx.Where("id = ?", id).Delete(&SendSlot{})
	}
	return tx.Model(&SendSlot{}).Where("id = ?", id).Update("counted_at", *countedAt)
}

// Message returns the message with the given id, or ErrNotFound.
func (s *Store) Message(ctx context.Context, id string) (*Message, error) {
	if !isText(id) {
		return nil, notText("message", id)
	}
	var m Message
	if err := s.db.WithContext(ctx).Where("id = ?", id).Take(&m).Error; err != nil {
		return nil, wrap(err, "message %s", id)
	}
	return &m, nil
}

// MessageFilter selects messages for Messages. Empty fields do not filter;
// Limit <= 0 means no limit.
type MessageFilter struct {
	InboxID  string
	ThreadID string
	// Query is a case-insensitive substring of the subject, the text body
	// or (unless ContentOnly) the From address. % and _ in it are literal.
	// Three characters or more are looked up in the full-text index
	// (migration 0004); shorter ones scan, so callers bound them with a
	// context deadline.
	Query string
	// ContentOnly restricts Query to subject and body, as POST /v1/search
	// does: every message of an inbox has the same From.
	ContentOnly bool
	// OmitBodies leaves Text and HTML empty and fills TextBytes and
	// HTMLBytes instead, so that a page can be sized before its bodies are
	// read (see MessageBodies).
	OmitBodies bool
	// SkipTotal skips counting the matches (Messages returns -1): POST
	// /v1/search has no total, and for a common word the count is half the
	// cost of a search.
	SkipTotal bool
	// Status, when set, keeps the messages with that status.
	Status string
	// Since and Until, when not zero, keep the messages created at or
	// after Since and before Until.
	Since, Until time.Time
	Limit        int
	Offset       int
}

// Messages returns a page of the messages matching f, newest first, and how
// many match in all (-1 with SkipTotal). The queries run under ctx: a cancelled or expired
// context stops them and its error is returned wrapped.
func (s *Store) Messages(ctx context.Context, f MessageFilter) ([]Message, int64, error) {
	if !isText(f.InboxID) || !isText(f.ThreadID) || !isText(f.Query) {
		if f.SkipTotal {
			return []Message{}, -1, nil
		}
		return []Message{}, 0, nil // matches nothing (see isText)
	}
	where := func(db *gorm.DB) *gorm.DB {
		if f.InboxID != "" {
			// On SQLite the inbox index would otherwise drive the query and
			// test every message of the inbox against the full-text match;
			// "+" makes the match's few rowids drive it instead.
			col := "inbox_id"
			if s.usesFTS(f.Query) && f.ThreadID == "" {
				col = "+inbox_id"
			}
			db = db.Where(col+" = ?", f.InboxID)
		}
		if f.ThreadID != "" {
			db = db.Where("thread_id = ?", f.ThreadID)
		}
		if f.Status != "" {
			db = db.Where("status = ?", f.Status)
		}
		if !f.Since.IsZero() {
			db = db.Where("created_at >= ?", f.Since.UTC())
		}
		if !f.Until.IsZero() {
			db = db.Where("created_at < ?", f.Until.UTC())
		}
		if f.Query != "" {
			db = s.searchCondition(db, f.Query, f.ContentOnly)
		}
		return db
	}

	total := int64(-1)
	if !f.SkipTotal {
		if err := s.db.WithContext(ctx).Model(&Message{}).Scopes(where).Count(&total).Error; err != nil {
			return nil, 0, wrap(err, "count messages")
		}
	}
	ms := []Message{}
	q := s.db.WithContext(ctx).Model(&Message{}).Scopes(where)
	if f.OmitBodies {
		q = q.Select(s.headColumns())
	}
	err := q.Order("created_at DESC, id DESC").Limit(noLimit(f.Limit)).Offset(f.Offset).Find(&ms).Error
	if err != nil {
		return nil, 0, wrap(err, "list messages")
	}
	return ms, total, nil
}

// escapeLike makes s match itself literally inside a LIKE pattern that
// uses ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// ThreadMessages returns a thread's messages, oldest first.
func (s *Store) ThreadMessages(ctx context.Context, threadID string) ([]Message, error) {
	ms := []Message{}
	err := s.db.WithContext(ctx).Where("thread_id = ?", threadID).Order("created_at, id").Find(&ms).Error
	if err != nil {
		return nil, wrap(err, "messages of thread %s", threadID)
	}
	return ms, nil
}

// LastMessage returns the newest message of a thread, the one a reply
// answers, or ErrNotFound if the thread has none.
func (s *Store) LastMessage(ctx context.Context, threadID string) (*Message, error) {
	var m Message
	err := s.db.WithContext(ctx).Where("thread_id = ?", threadID).Order("created_at DESC, id DESC").Take(&m).Error
	if err != nil {
		return nil, wrap(err, "last message of thread %s", threadID)
	}
	return &m, nil
}
