package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ErrInboxBusy is what an *InboxBusyError is (errors.Is): the inbox has a
// send in flight, and was not deleted.
var ErrInboxBusy = errors.New("store: inbox has a send in flight")

// InboxBusyError is returned by DeleteInbox when a send of the inbox is in
// flight, on this server or another sharing the database: its message is
// recorded and the provider may have it, and deleting the inbox now would
// take the record of its outcome with it. Nothing was deleted; the caller
// tries again once the send is settled, at Until at the latest, when the
// last such send's lease ends.
type InboxBusyError struct {
	ID    string
	Until time.Time // the latest deadline of the inbox's sends in flight
}

func (e *InboxBusyError) Error() string {
	return fmt.Sprintf("store: inbox %s has a send in flight until %s", e.ID, e.Until.Format(time.RFC3339Nano))
}

// Is makes an *InboxBusyError match ErrInboxBusy.
func (e *InboxBusyError) Is(target error) bool { return target == ErrInboxBusy }

// DeleteInbox deletes the inbox and, through the schema's cascades, its
// threads, messages and attachments, unless a send of it is in flight at
// now: a row of send_log not yet counted whose deadline is after now
// (*InboxBusyError, nothing deleted). A row whose deadline has passed is
// a crashed server's, which can no longer record anything, and does not
// hold the deletion. It returns ErrNotFound if there was no such inbox.
//
// The database orders the deletion with the sends, whichever server makes
// them: the inbox's row is locked first (PostgreSQL: FOR UPDATE; SQLite
// has one writer, and the Store one connection), and a send's first write
// locks it too (the message's foreign key, or ClaimHeld's FOR KEY SHARE).
// So a send recorded before the lock is seen here in flight, and a send
// after it waits, then finds no inbox.
func (s *Store) DeleteInbox(ctx context.Context, id string, now time.Time) error {
	if !isText(id) {
		return notText("inbox", id)
	}
	defer s.inboxes.evict(id)
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		lock := tx.Model(&Inbox{}).Select("id").Where("id = ?", id)
		if s.driver == DriverPostgres {
			lock = lock.Clauses(clause.Locking{Strength: "UPDATE"})
		}
		var found string
		if err := lock.Take(&found).Error; err != nil {
			return err
		}
		var live []SendSlot
		err := tx.Select("deadline").Where("inbox_id = ? AND counted_at IS NULL AND deadline > ?", id, utc(now)).
			Order("deadline DESC").Limit(1).Find(&live).Error
		if err != nil {
			return err
		}
		if len(live) > 0 {
			return &InboxBusyError{ID: id, Until: live[0].Deadline.UTC()}
		}
		return tx.Where("id = ?", id).Delete(&Inbox{}).Error
	})
	var busy *InboxBusyError
	if errors.As(err, &busy) {
		return busy
	}
	return wrap(err, "delete inbox %s", id)
}
