package store

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/nornweave/nornweave/core/clock"
)

// The wait between two looks at an inbox's sends in flight, doubling from
// the first to the last: a send's end cannot be signalled across servers,
// only seen in the database.
const (
	deleteLookFirst = 10 * time.Millisecond
	deleteLookMax   = 500 * time.Millisecond
)

// errInboxBusy ends a look at an inbox that found a send in flight.
var errInboxBusy = errors.New("store: inbox has a send in flight")

// DeleteInbox deletes the inbox and, through the schema's cascades, its
// threads, messages and attachments, once no send of it is in flight: no
// row of send_log not yet counted whose deadline is after clk's now. A
// row whose deadline has passed is a crashed server's, which can record
// nothing more, and does not hold the deletion. It returns ErrNotFound if
// there was no such inbox, and ctx's error if ctx ends while it waits.
//
// The database orders the deletion with the sends, whichever server makes
// them. On PostgreSQL the inbox's row is locked FOR UPDATE for the whole
// wait, and a send's first write takes it FOR KEY SHARE (the message's
// foreign key, inboxLockCTE): a send recorded before the lock is seen in
// flight and waited for (its outcome takes no lock on the inbox), and a
// send after it waits behind the deletion, then finds no inbox. So the
// wait is bounded by construction, by the latest deadline of the sends in
// flight when it began. On SQLite the Store has one connection, which the
// wait must not hold: each look is a transaction of its own, and the
// server's own gate (skuld's CloseInbox) keeps new sends out meanwhile;
// no other server shares the file.
func (s *Store) DeleteInbox(ctx context.Context, id string, clk clock.Clock) error {
	if !isText(id) {
		return notText("inbox", id)
	}
	defer s.inboxes.evict(id)
	var err error
	if s.driver == DriverPostgres {
		err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			return s.deleteSettled(ctx, tx, id, clk, true)
		})
	} else {
		err = s.deleteSettled(ctx, s.db.WithContext(ctx), id, clk, false)
	}
	return wrap(err, "delete inbox %s", id)
}

// deleteSettled looks at inbox id's sends in flight until there is none,
// then deletes it. locked: db is a transaction in which the inbox's row
// is locked for the whole wait; otherwise each look is a transaction.
func (s *Store) deleteSettled(ctx context.Context, db *gorm.DB, id string, clk clock.Clock, locked bool) error {
	if locked {
		var found string
		if err := db.Model(&Inbox{}).Select("id").Where("id = ?", id).
			Clauses(clause.Locking{Strength: "UPDATE"}).Take(&found).Error; err != nil {
			return err
		}
	}
	wait := deleteLookFirst
	for logged := false; ; logged = true {
		now := clk.Now()
		var until time.Time
		look := func(tx *gorm.DB) error {
			var err error
			if until, err = liveUntil(tx, id, now); err != nil || !until.IsZero() {
				return cmp.Or(err, errInboxBusy)
			}
			res := tx.Where("id = ?", id).Delete(&Inbox{})
			if res.Error == nil && res.RowsAffected == 0 {
				return gorm.ErrRecordNotFound
			}
			return res.Error
		}
		var err error
		if locked {
			err = look(db)
		} else {
			err = db.Transaction(look)
		}
		if !errors.Is(err, errInboxBusy) {
			return err
		}
		if !logged {
			s.logger.InfoContext(ctx, "inbox deletion waits for its sends in flight",
				slog.String("inbox_id", id), slog.Time("until", until))
		}
		if err := sleep(ctx, clk, min(wait, max(until.Sub(now), 0))); err != nil {
			return err
		}
		wait = min(2*wait, deleteLookMax)
	}
}

// liveUntil is the latest deadline after now of inbox id's sends in
// flight; zero if there is none.
func liveUntil(tx *gorm.DB, id string, now time.Time) (time.Time, error) {
	var live []SendSlot
	err := tx.Select("deadline").Where("inbox_id = ? AND counted_at IS NULL AND deadline > ?", id, utc(now)).
		Order("deadline DESC").Limit(1).Find(&live).Error
	if err != nil || len(live) == 0 {
		return time.Time{}, err
	}
	return live[0].Deadline.UTC(), nil
}

// sleep waits d on clk, or until ctx ends.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	done := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
