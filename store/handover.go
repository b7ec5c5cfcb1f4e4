package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// notSentError is recorded on a direct send that a stopped server left
// waiting for the provider: none of its bytes had gone.
const notSentError = "not sent: the server stopped before handing it to the provider; it is safe to send again"

// LaneJob writes the lane job of an inbox with queued mail, due at at
// (the app's (*hold.Queue).Lane), in the transaction that queues it.
type LaneJob func(inboxID string, at time.Time) JobTx

// MarkSendWaiting records that the send of message id waits for the
// provider: its bytes cannot go before MarkSendHandedOver, and a dead
// server's send found waiting is given back, not counted.
func (s *Store) MarkSendWaiting(ctx context.Context, id string) error {
	return wrap(s.markWaiting(ctx, id, true), "mark send %s waiting", id)
}

// MarkSendHandedOver records that the send of message id, which waited,
// may now have its bytes going to the provider. It fails with ErrNotFound
// if the send is no longer in flight (a recovery gave it back): it must
// then not go.
func (s *Store) MarkSendHandedOver(ctx context.Context, id string) error {
	return wrap(s.markWaiting(ctx, id, false), "mark send %s handed over", id)
}

func (s *Store) markWaiting(ctx context.Context, id string, waiting bool) error {
	res := s.db.WithContext(ctx).Model(&SendSlot{}).Where("id = ? AND counted_at IS NULL", id).
		Update("waiting", waiting)
	if res.Error == nil && res.RowsAffected == 0 {
		return gorm.ErrRecordNotFound
	}
	return res.Error
}

// RecoverScope limits RecoverSends to one message's slot (MessageID) or
// one inbox's slots (InboxID).
type RecoverScope struct {
	MessageID string
	InboxID   string
}

// RecoverSends resolves the sends in flight within scope whose deadline
// was before before, as ResolveExpiredSends does for every inbox: for a
// job that finds its message or its lane left by a server that died.
// Held messages given back are due at now.
func (s *Store) RecoverSends(ctx context.Context, scope RecoverScope, now, before time.Time, lane LaneJob) (int64, error) {
	before = utc(before)
	n, err := s.recover(ctx, recovery{now: now, lane: lane, countAt: gorm.Expr("deadline"),
		slots: func(db *gorm.DB) *gorm.DB {
			db = db.Where("deadline < ?", before)
			if scope.MessageID != "" {
				db = db.Where("id = ?", scope.MessageID)
			}
			if scope.InboxID != "" {
				db = db.Where("inbox_id = ?", scope.InboxID)
			}
			return db
		}})
	return n, wrap(err, "recover sends of %+v", scope)
}

// recovery is what one resolution of sends left in flight covers.
type recovery struct {
	now time.Time
	// slots narrows the sends in flight to those resolved.
	slots func(*gorm.DB) *gorm.DB
	// countAt is when a send that may have gone out counts from.
	countAt clause.Expr
	// everySending fails, delivery unknown, every message still sending,
	// with a slot or not: at a restart alone, none is this server's.
	everySending bool
	lane         LaneJob
}

// recover resolves the sends in flight that r covers, in one transaction,
// and returns how many. A send that was waiting for the provider never
// went out: its slot is deleted, giving it back to the throttle, and its
// message, if held, is queued again with its lane's job, or, if sent
// directly, fails as not sent. Any other send may have gone out: it counts
// from r.countAt and its message fails, delivery unknown.
func (s *Store) recover(ctx context.Context, r recovery) (int64, error) {
	now := utc(r.now)
	var n int64
	err := s.inTx(ctx, func(tx *gorm.DB, sqlTx *sql.Tx) error {
		var open []struct {
			ID      string
			Waiting bool
		}
		if err := r.slots(tx.Model(&SendSlot{}).Where("counted_at IS NULL")).Select("id, waiting").
			Find(&open).Error; err != nil || (len(open) == 0 && !r.everySending) {
			return err
		}
		var waiting, handed []string
		for _, o := range open {
			if o.Waiting {
				waiting = append(waiting, o.ID)
			} else {
				handed = append(handed, o.ID)
			}
		}
		given, err := s.giveBack(ctx, tx, sqlTx, waiting, now, r.lane)
		if err != nil {
			return err
		}
		counted, err := countUnknown(tx, handed, r.countAt, r.everySending)
		n = given + counted
		return err
	})
	return n, err
}

// giveBack deletes the slots of ids that are still waiting, queues their
// held messages again (version + 1, due now) with their inboxes' lane
// jobs, and fails their direct messages as not sent.
func (s *Store) giveBack(ctx context.Context, tx *gorm.DB, sqlTx *sql.Tx, ids []string, now time.Time, lane LaneJob) (int64, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	res := tx.Where("id IN ? AND counted_at IS NULL AND waiting", ids).Delete(&SendSlot{})
	if res.Error != nil {
		return 0, res.Error
	}
	var inboxes []string
	if err := tx.Model(&Message{}).Where("id IN ? AND status = ? AND version > 0", ids, StatusSending).
		Distinct("inbox_id").Pluck("inbox_id", &inboxes).Error; err != nil {
		return 0, err
	}
	if len(inboxes) > 0 && lane == nil {
		return 0, fmt.Errorf("held messages to queue again in %d inboxes, and no lane job to write", len(inboxes))
	}
	if err := tx.Model(&Message{}).Where("id IN ? AND status = ? AND version > 0", ids, StatusSending).
		Updates(map[string]any{"status": StatusQueued, "version": gorm.Expr("version + 1"),
			"next_attempt_at": now}).Error; err != nil {
		return 0, err
	}
	for _, in := range inboxes {
		if err := lane(in, now)(ctx, sqlTx); err != nil {
			return 0, fmt.Errorf("lane job of inbox %s: %w", in, err)
		}
	}
	err := tx.Model(&Message{}).Where("id IN ? AND status = ? AND version = 0", ids, StatusSending).
		Updates(map[string]any{"status": StatusFailed, "error": notSentError}).Error
	return res.RowsAffected, err
}

// countUnknown counts the sends ids that are still in flight from countAt
// and fails their messages, delivery unknown; with every, every message
// still sending fails so.
func countUnknown(tx *gorm.DB, ids []string, countAt clause.Expr, every bool) (int64, error) {
	var n int64
	if len(ids) > 0 {
		res := tx.Model(&SendSlot{}).Where("id IN ? AND counted_at IS NULL", ids).Update("counted_at", countAt)
		if res.Error != nil {
			return 0, res.Error
		}
		n = res.RowsAffected
	}
	q := tx.Model(&Message{}).Where("status = ?", StatusSending)
	if !every {
		if len(ids) == 0 {
			return n, nil
		}
		q = q.Where("id IN ?", ids)
	}
	return n, q.Updates(map[string]any{"status": StatusFailed, "error": interruptedError}).Error
}
