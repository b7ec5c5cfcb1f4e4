package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ErrNotHeld is returned when a held message's change finds the message
// no longer held: it is being sent, was sent, failed or was canceled.
var ErrNotHeld = errors.New("store: message is not held")

// JobTx writes a held message's job (River's) inside the transaction that
// changes the message, so that the two are stored together or not at all.
type JobTx func(ctx context.Context, tx *sql.Tx) error

// heldStatuses are the statuses of a message not yet dispatched.
var heldStatuses = []string{StatusScheduled, StatusQueued}

// inTx runs f in one transaction with gorm's handle and the *sql.Tx
// under it, which River's drivers take.
func (s *Store) inTx(ctx context.Context, f func(tx *gorm.DB, sqlTx *sql.Tx) error) error {
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		sqlTx, ok := tx.Statement.ConnPool.(*sql.Tx)
		if !ok {
			return fmt.Errorf("store: transaction is a %T, not a *sql.Tx", tx.Statement.ConnPool)
		}
		return f(tx, sqlTx)
	})
}

// CreateHeldMessage is CreateMessage for a message that is not sent now
// (status scheduled or queued, no slot in the throttle's log): job writes
// the job that will dispatch it in the same transaction.
func (s *Store) CreateHeldMessage(ctx context.Context, m *Message, atts []Attachment, newThread *Thread, job JobTx) error {
	if !Held(m.Status) {
		return fmt.Errorf("store: create held message %s: status %q is not held", m.ID, m.Status)
	}
	s.prepareCreate(m, atts, newThread, nil)
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		if err := s.insertMessage(tx, m, atts, newThread, nil); err != nil {
			return err
		}
		return job(ctx, sqlTx)
	})
	return wrap(err, "create held message %s in thread %s", m.ID, m.ThreadID)
}

// ClaimHeld moves a held message to sending and writes its slot in the
// throttle's log, in one transaction, if and only if it is still held
// (ErrNotHeld otherwise; ErrNotFound if it is gone). It is the one
// compare-and-set that decides between a dispatch and a cancel: of the
// two, exactly one changes the row. m is the message as the caller read
// it; its status and next attempt are updated in place.
func (s *Store) ClaimHeld(ctx context.Context, m *Message, slot *SendSlot) error {
	prepareSlot(slot, m)
	if s.driver == DriverPostgres {
		if err := s.claimHeldPostgres(ctx, m, slot); err != nil {
			return wrap(err, "claim held message %s", m.ID)
		}
		m.Status, m.NextAttemptAt = StatusSending, nil
		return nil
	}
	err := s.inTx(ctx, func(tx *gorm.DB, _ *sql.Tx) error {
		if err := s.casHeld(tx, m.ID, map[string]any{"status": StatusSending, "next_attempt_at": nil}); err != nil {
			return err
		}
		return tx.Create(slot).Error
	})
	if err != nil {
		return wrap(err, "claim held message %s", m.ID)
	}
	m.Status, m.NextAttemptAt = StatusSending, nil
	return nil
}

// claimHeldPostgres is ClaimHeld in ONE statement, as createMessagePostgres
// does a send's first write: the slot is written only if the message was
// moved (FROM c), so no transaction is needed. An UPDATE of the message
// takes no lock on its inbox, so the statement takes the inbox's row FOR
// KEY SHARE first, as a direct send's foreign key does (inboxLockCTE):
// a deletion of the inbox either sees the slot in flight, or comes first
// and leaves no message to claim (ErrNotFound, nothing sent).
func (s *Store) claimHeldPostgres(ctx context.Context, m *Message, slot *SendSlot) error {
	res := s.db.WithContext(ctx).Exec(inboxLockCTE+`c AS (UPDATE messages SET status = ?, next_attempt_at = NULL
		WHERE `+inboxLocked+`id = ? AND status IN ?  RETURNING id)
		INSERT INTO send_log (id, inbox_id, scope, reserved_at, deadline)
		SELECT ?, ?, ?, CAST(? AS timestamptz), CAST(? AS timestamptz) FROM c`,
		slot.InboxID, StatusSending, m.ID, heldStatuses, slot.ID, slot.InboxID, slot.Scope, slot.ReservedAt, slot.Deadline)
	if res.Error != nil || res.RowsAffected == 1 {
		return res.Error
	}
	var status string
	if err := s.db.WithContext(ctx).Model(&Message{}).Where("id = ?", m.ID).Select("status").Take(&status).Error; err != nil {
		return err
	}
	return fmt.Errorf("%w (it is %s)", ErrNotHeld, status)
}

// casHeld applies updates to message id if it is held.
func (s *Store) casHeld(tx *gorm.DB, id string, updates map[string]any) error {
	res := tx.Model(&Message{}).Where("id = ? AND status IN ?", id, heldStatuses).Updates(updates)
	if res.Error != nil || res.RowsAffected == 1 {
		return res.Error
	}
	var status string
	if err := tx.Model(&Message{}).Where("id = ?", id).Select("status").Take(&status).Error; err != nil {
		return err // gorm.ErrRecordNotFound: gone
	}
	return fmt.Errorf("%w (it is %s)", ErrNotHeld, status)
}

// CancelHeld cancels a held message: see ClaimHeld for the race with its
// dispatch. It returns the message as canceled.
func (s *Store) CancelHeld(ctx context.Context, id string) (*Message, error) {
	return s.changeHeld(ctx, id, map[string]any{"status": StatusCanceled, "next_attempt_at": nil}, nil)
}

// RescheduleHeld makes a held message scheduled for at, and writes its
// new job with job in the same transaction; a job written before for it
// finds it due at another time and does nothing.
func (s *Store) RescheduleHeld(ctx context.Context, id string, at time.Time, job JobTx) (*Message, error) {
	return s.changeHeld(ctx, id, map[string]any{"status": StatusScheduled, "scheduled_at": utc(at),
		"next_attempt_at": nil}, job)
}

// QueueHeld makes a held message queued, expected to have room at next,
// and writes (or makes sure of) its inbox's lane job with job.
func (s *Store) QueueHeld(ctx context.Context, id string, next time.Time, job JobTx) (*Message, error) {
	return s.changeHeld(ctx, id, map[string]any{"status": StatusQueued, "next_attempt_at": utc(next)}, job)
}

// FailHeld fails a held message without sending it (expired, or its
// domain blocked at dispatch), in the transaction job completes its job in.
func (s *Store) FailHeld(ctx context.Context, id, reason string, job JobTx) (*Message, error) {
	return s.changeHeld(ctx, id, map[string]any{"status": StatusFailed, "error": reason, "next_attempt_at": nil}, job)
}

func (s *Store) changeHeld(ctx context.Context, id string, updates map[string]any, job JobTx) (*Message, error) {
	if !isText(id) {
		return nil, notText("message", id)
	}
	var m Message
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		if err := s.casHeld(tx, id, updates); err != nil {
			return err
		}
		if job != nil {
			if err := job(ctx, sqlTx); err != nil {
				return err
			}
		}
		return tx.Where("id = ?", id).Take(&m).Error
	})
	if err != nil {
		return nil, wrap(err, "change held message %s", id)
	}
	return &m, nil
}

// Completion completes a held message's job when its outcome is recorded
// (FinishHeld). Tx does it inside the outcome's transaction; SQL, when
// set, is the same change as one statement, which on PostgreSQL FinishHeld
// makes part of the outcome's own: one round trip where the transaction
// (BEGIN, the outcome, the job, COMMIT) takes four.
type Completion struct {
	Tx  JobTx
	SQL *JobSQL
}

// NoCompletion completes nothing.
var NoCompletion = Completion{Tx: func(context.Context, *sql.Tx) error { return nil }}

// JobSQL is a job's change as one data-modifying statement on PostgreSQL,
// with ? placeholders, that returns a row (RETURNING) when it took effect.
// Args are taken when it runs; What names it in the error of one that took
// no effect.
type JobSQL struct {
	SQL  string
	Args func() []any
	What string
}

// FinishHeld records a dispatched message's outcome (see
// UpdateMessageOutcome; a held status puts it back, not taken, to be
// tried again) and completes its job with c, both or neither.
func (s *Store) FinishHeld(ctx context.Context, id string, o Outcome, c Completion) error {
	if s.driver == DriverPostgres && c.SQL != nil {
		return wrap(s.finishHeldPostgres(ctx, id, o, c.SQL), "finish held message %s", id)
	}
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		if _, err := s.writeOutcome(tx, id, o, true); err != nil {
			return err
		}
		return c.Tx(ctx, sqlTx)
	})
	return wrap(err, "finish held message %s", id)
}

// finishHeldPostgres is FinishHeld in ONE statement: the job's change (j)
// first, and the slot's and the message's writes only if it took effect,
// as a transaction would roll them back with a job's change that failed.
func (s *Store) finishHeldPostgres(ctx context.Context, id string, o Outcome, job *JobSQL) error {
	const guard = ` AND EXISTS (SELECT 1 FROM j)`
	slot, slotVars, set, setVars := outcomeSQL(id, o, utcPtr(o.SentAt), utcPtr(o.CountedAt), true, guard)
	vars := append(append(job.Args(), slotVars...), setVars...)
	var done int64
	err := s.db.WithContext(ctx).Raw("WITH j AS ("+job.SQL+"), l AS ("+slot+"), m AS ("+set+") SELECT COUNT(*) FROM j",
		vars...).Row().Scan(&done) // Row: gorm's Scan renders every statement's SQL with its values, logged or not
	if err == nil && done == 0 {
		err = fmt.Errorf("%s: took no effect", job.What)
	}
	return err
}

// DueMessage returns a scheduled message's row, as Message does, and
// whether its inbox has queued mail (a lane it must join), read in one
// statement: a scheduled burst reads both for every message, and on SQLite
// the second statement was a tenth of the dispatch's CPU.
func (s *Store) DueMessage(ctx context.Context, id string) (*Message, bool, error) {
	if !isText(id) {
		return nil, false, notText("message", id)
	}
	var row struct {
		Message  `gorm:"embedded"`
		LaneBusy bool
	}
	// The status is written out, not a parameter: PostgreSQL's generic
	// plan of a prepared statement can then use the lane's partial index.
	// Rows and ScanRows, not Scan: gorm's Scan renders every statement's
	// SQL with its values, logged or not (4% of the server's CPU in a
	// scheduled burst).
	rows, err := s.db.WithContext(ctx).Raw(`SELECT m.*, EXISTS (SELECT 1 FROM messages q
		WHERE q.inbox_id = m.inbox_id AND q.status = '`+StatusQueued+`') AS lane_busy FROM messages m WHERE m.id = ?`,
		id).Rows()
	if err != nil {
		return nil, false, wrap(err, "due message %s", id)
	}
	defer rows.Close()
	if !rows.Next() {
		return nil, false, wrap(cmp.Or(rows.Err(), gorm.ErrRecordNotFound), "due message %s", id)
	}
	if err := s.db.ScanRows(rows, &row); err != nil {
		return nil, false, wrap(err, "due message %s", id)
	}
	return &row.Message, row.LaneBusy, nil
}

// LaneHead returns the inbox's queued message that is due first (a
// scheduled message that was throttled is due at its time, a queued one
// at its acceptance), or ErrNotFound when none is queued.
func (s *Store) LaneHead(ctx context.Context, inboxID string) (*Message, error) {
	var m Message
	err := s.db.WithContext(ctx).Where("inbox_id = ? AND status = ?", inboxID, StatusQueued).
		Order("COALESCE(scheduled_at, created_at), id").Take(&m).Error
	if err != nil {
		return nil, wrap(err, "lane head of inbox %s", inboxID)
	}
	return &m, nil
}

// SetNextAttempt records when a queued message is next expected to go.
func (s *Store) SetNextAttempt(ctx context.Context, id string, at time.Time) error {
	err := s.db.WithContext(ctx).Model(&Message{}).Where("id = ? AND status = ?", id, StatusQueued).
		Update("next_attempt_at", utc(at)).Error
	return wrap(err, "set next attempt of message %s", id)
}

// QueuedInboxes lists the inboxes with queued messages: the lanes that
// must have a job.
func (s *Store) QueuedInboxes(ctx context.Context) ([]string, error) {
	ids := []string{}
	err := s.db.WithContext(ctx).Model(&Message{}).Where("status = ?", StatusQueued).
		Distinct("inbox_id").Pluck("inbox_id", &ids).Error
	return ids, wrap(err, "queued inboxes")
}

// HeldStats is what the queue metrics report.
type HeldStats struct {
	// Count is the number of messages in each held status.
	Count map[string]int64
	// OldestQueued is when the longest-waiting queued message became
	// due; zero when none is queued.
	OldestQueued time.Time
}

// Held returns the counts of held messages by status and the oldest
// queued one's due time.
func (s *Store) HeldStats(ctx context.Context) (HeldStats, error) {
	var rows []struct {
		Status string
		N      int64
	}
	db := s.db.WithContext(ctx)
	err := db.Model(&Message{}).Select("status, COUNT(*) AS n").Where("status IN ?", heldStatuses).
		Group("status").Scan(&rows).Error
	if err != nil {
		return HeldStats{}, wrap(err, "held counts")
	}
	st := HeldStats{Count: map[string]int64{StatusScheduled: 0, StatusQueued: 0}}
	for _, r := range rows {
		st.Count[r.Status] = r.N
	}
	if st.Count[StatusQueued] == 0 {
		return st, nil
	}
	var m Message
	err = db.Where("status = ?", StatusQueued).Order("COALESCE(scheduled_at, created_at), id").
		Select("id, created_at, scheduled_at").Take(&m).Error
	if err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
		return st, wrap(err, "oldest queued message")
	}
	st.OldestQueued = m.CreatedAt
	if m.ScheduledAt != nil {
		st.OldestQueued = *m.ScheduledAt
	}
	return st, nil
}
