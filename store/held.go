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
	m.Version = 1
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
// throttle's log, in one transaction, if and only if it is still held at
// the version m was read at (ErrNotHeld otherwise; ErrNotFound if it is
// gone). It is the one compare-and-set that decides between a dispatch and
// a cancel or reschedule: of the two, exactly one changes the row, so a
// change answered 200 is never overtaken by a dispatch of the message as
// it was. m's status, next attempt and version are updated in place.
func (s *Store) ClaimHeld(ctx context.Context, m *Message, slot *SendSlot) error {
	prepareSlot(slot, m)
	var err error
	if s.driver == DriverPostgres {
		err = s.claimHeldPostgres(ctx, m, slot)
	} else {
		err = s.inTx(ctx, func(tx *gorm.DB, _ *sql.Tx) error {
			if err := s.casHeld(tx, m.ID, m.Version, map[string]any{"status": StatusSending, "next_attempt_at": nil}); err != nil {
				return err
			}
			return tx.Create(slot).Error
		})
	}
	if err != nil {
		return wrap(err, "claim held message %s", m.ID)
	}
	m.Status, m.NextAttemptAt, m.Version = StatusSending, nil, m.Version+1
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
	res := s.db.WithContext(ctx).Exec(inboxLockCTE+`c AS (UPDATE messages SET status = ?, next_attempt_at = NULL,
		version = version + 1 WHERE `+inboxLocked+`id = ? AND version = ? AND status IN ? RETURNING id)
		INSERT INTO send_log (id, inbox_id, scope, reserved_at, deadline, cost)
		SELECT ?, ?, ?, CAST(? AS timestamptz), CAST(? AS timestamptz), CAST(? AS integer) FROM c`,
		slot.InboxID, StatusSending, m.ID, m.Version, heldStatuses, slot.ID, slot.InboxID, slot.Scope, slot.ReservedAt,
		slot.Deadline, slot.Cost)
	if res.Error != nil || res.RowsAffected == 1 {
		return res.Error
	}
	return notHeld(s.db.WithContext(ctx), m.ID)
}

// casHeld applies updates to message id if it is held and, unless version
// is 0, still at that version; it bumps the version.
func (s *Store) casHeld(tx *gorm.DB, id string, version int, updates map[string]any) error {
	updates["version"] = gorm.Expr("version + 1")
	q := tx.Model(&Message{}).Where("id = ? AND status IN ?", id, heldStatuses)
	if version != 0 {
		q = q.Where("version = ?", version)
	}
	res := q.Updates(updates)
	if res.Error != nil || res.RowsAffected == 1 {
		return res.Error
	}
	return notHeld(tx, id)
}

// notHeld is the error of a change of message id that found it not held,
// or held at another version; gorm.ErrRecordNotFound if it is gone.
func notHeld(db *gorm.DB, id string) error {
	var m Message
	if err := db.Model(&Message{}).Where("id = ?", id).Select("status", "version").Take(&m).Error; err != nil {
		return err
	}
	return fmt.Errorf("%w (it is %s, version %d)", ErrNotHeld, m.Status, m.Version)
}

// CancelHeld cancels a held message: see ClaimHeld for the race with its
// dispatch. It returns the message as canceled.
func (s *Store) CancelHeld(ctx context.Context, id string) (*Message, error) {
	return s.changeHeld(ctx, id, 0, map[string]any{"status": StatusCanceled, "next_attempt_at": nil}, nil)
}

// RescheduleHeld makes a held message scheduled for at, and writes its
// new job with job in the same transaction; a job written before for it
// finds it due at another time and does nothing.
func (s *Store) RescheduleHeld(ctx context.Context, id string, at time.Time, job JobTx) (*Message, error) {
	return s.changeHeld(ctx, id, 0, map[string]any{"status": StatusScheduled, "scheduled_at": utc(at),
		"next_attempt_at": nil}, job)
}

// QueueHeld makes held message m queued, expected to have room at next, if
// it is still at the version m was read at, and writes (or makes sure of)
// its inbox's lane job with job.
func (s *Store) QueueHeld(ctx context.Context, m *Message, next time.Time, job JobTx) (*Message, error) {
	return s.changeHeld(ctx, m.ID, m.Version, map[string]any{"status": StatusQueued, "next_attempt_at": utc(next)}, job)
}

// FailHeld fails held message m without sending it (expired, or its domain
// blocked at dispatch), if it is still at the version m was read at.
func (s *Store) FailHeld(ctx context.Context, m *Message, reason string) (*Message, error) {
	return s.changeHeld(ctx, m.ID, m.Version, map[string]any{"status": StatusFailed, "error": reason, "next_attempt_at": nil}, nil)
}

// changeHeld applies updates to held message id (at version, unless 0)
// and runs job in the same transaction.
func (s *Store) changeHeld(ctx context.Context, id string, version int, updates map[string]any, job JobTx) (*Message, error) {
	if !isText(id) {
		return nil, notText("message", id)
	}
	var m Message
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		if err := s.casHeld(tx, id, version, updates); err != nil {
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

// FinishHeld records a dispatched message's outcome (see
// UpdateMessageOutcome; a held status puts it back, not taken, to be
// tried again): one statement on PostgreSQL. Its job is River's to
// complete when the dispatch returns; one run again after a crash between
// the two finds the message no longer held at its version, and does
// nothing.
func (s *Store) FinishHeld(ctx context.Context, id string, o Outcome) error {
	var err error
	if s.driver == DriverPostgres {
		_, err = s.writeOutcome(s.db.WithContext(ctx), id, o, true)
	} else {
		err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			_, err := s.writeOutcome(tx, id, o, true)
			return err
		})
	}
	return wrap(err, "finish held message %s", id)
}

// ShareLane and lockLane order, inside a transaction, the writers of the
// inbox's lane job: transactions that queue mail and make sure of the
// lane's job (ShareLane), and the lane's job ending because it found no
// queued mail (lockLane, in EndLane). Without them, the lane's job could
// see no queued mail while a message being queued saw the job still
// running and wrote none: that message would have no job. Queuers only
// race the end, not each other, so they share the lock: a burst of
// queued or Prefer: respond-async sends of one inbox is recorded side by
// side (one at a time, a 202's p99 was 630 ms at 32 clients). On
// PostgreSQL it is a transaction-scoped advisory lock per inbox; SQLite
// has one writer at a time already.
func (s *Store) ShareLane(ctx context.Context, tx *sql.Tx, inboxID string) error {
	return s.laneLock(ctx, tx, inboxID, "pg_advisory_xact_lock_shared")
}

func (s *Store) lockLane(ctx context.Context, tx *sql.Tx, inboxID string) error {
	return s.laneLock(ctx, tx, inboxID, "pg_advisory_xact_lock")
}

func (s *Store) laneLock(ctx context.Context, tx *sql.Tx, inboxID, fn string) error {
	if s.driver != DriverPostgres {
		return nil
	}
	_, err := tx.ExecContext(ctx, "SELECT "+fn+"($1, hashtext($2))", laneLock, inboxID)
	return wrap(err, "lock the lane of inbox %s", inboxID)
}

// laneLock is the lane's class of advisory locks ("lane"); with the inbox's
// hash, it must never change.
const laneLock int32 = 0x6c616e65

// EndLane runs end (which completes the lane's job) in a transaction, under
// lockLane, if the inbox has no queued mail; ended reports whether it did.
func (s *Store) EndLane(ctx context.Context, inboxID string, end JobTx) (ended bool, err error) {
	err = s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		if err := s.lockLane(ctx, sqlTx, inboxID); err != nil {
			return err
		}
		// The status written out, as DueMessage does, for the lane's index.
		var queued bool
		if err := tx.Raw(`SELECT EXISTS (SELECT 1 FROM messages WHERE inbox_id = ? AND status = '`+StatusQueued+`')`,
			inboxID).Row().Scan(&queued); err != nil || queued {
			return err
		}
		ended = true
		return end(ctx, sqlTx)
	})
	return ended, wrap(err, "end the lane of inbox %s", inboxID)
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

// HeldPage returns up to limit held messages from offset, in the order
// the dashboard lists them: by inbox, each inbox's queued mail first in
// its lane's order (LaneHead's: when it became due, then id), then its
// scheduled mail by scheduled_at (which is COALESCE's value for them).
// "queued" sorts before "scheduled", so the order is one index's,
// messages_held_page_idx (migration 0017): a page stops at its LIMIT.
// Bodies are not read.
func (s *Store) HeldPage(ctx context.Context, limit, offset int) ([]Message, error) {
	var ms []Message
	// The statuses are written out, as DueMessage's are, so that a
	// prepared statement's generic plan can use the partial index.
	// SQLite, with no statistics (nothing here runs ANALYZE), picks
	// messages_held_idx and sorts every held row; INDEXED BY holds it to
	// the page's index, and fails the statement if that index cannot
	// answer it.
	table := "messages"
	if s.driver == DriverSQLite {
		table = "messages INDEXED BY messages_held_page_idx"
	}
	err := s.db.WithContext(ctx).Table(table).
		Select("id, inbox_id, status, subject, to_addresses, cc_addresses, bcc_addresses, created_at, scheduled_at, next_attempt_at").
		Where("status IN ('" + StatusScheduled + "', '" + StatusQueued + "')").
		Order("inbox_id, status, COALESCE(scheduled_at, created_at), id").
		Limit(limit).Offset(offset).Find(&ms).Error
	return ms, wrap(err, "held messages")
}
