package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// interruptedError is recorded on sends that a stopped server left
// unfinished. The provider may or may not have delivered them.
const interruptedError = "interrupted: the server stopped before the provider answered; delivery unknown"

// SendSlot is a row of send_log: the throttle's own record of one send,
// kept apart from messages so that deleting an inbox, which deletes its
// messages, cannot make the throttle forget sends that still count.
type SendSlot struct {
	ID      string `gorm:"primaryKey"` // the message's id
	InboxID string
	// Scope is the key of the inbox's throttle windows (its address), so
	// that a send still counts for an inbox deleted and created again.
	Scope      string
	ReservedAt time.Time
	// Deadline is the latest moment the send can go out.
	Deadline time.Time
	// Cost is the units the send takes from the throttle: 1 for a
	// message, or its unique recipients (THROTTLE_UNIT=recipient). 0 is
	// written as 1.
	Cost int
	// CountedAt is when the send counts against the throttle: when it went
	// out or may have. Nil while it is in flight.
	CountedAt *time.Time
	// Waiting is true while the send waits for the provider (a connection
	// or a concurrency slot): until it is handed over, its bytes cannot
	// have gone, and a dead server's send that was waiting is given back
	// rather than counted as "delivery unknown".
	Waiting bool
	// JudgedBy, when set, is the copy of the inbox (InboxCopy) the send
	// was admitted by: the message and the slot are written only if the
	// inbox still reads so, else nothing is and the write fails with
	// ErrInboxChanged, or ErrNotFound if the inbox is gone.
	JudgedBy *Inbox `gorm:"-"`
}

// TableName implements gorm's tabler.
func (SendSlot) TableName() string { return "send_log" }

func prepareSlot(sl *SendSlot, m *Message) {
	sl.ID, sl.InboxID, sl.Cost = m.ID, m.InboxID, max(sl.Cost, 1)
	sl.ReservedAt, sl.Deadline = utc(sl.ReservedAt), utc(sl.Deadline)
	if sl.CountedAt != nil {
		t := utc(*sl.CountedAt)
		sl.CountedAt = &t
	}
}

// CountedSend is one send that counts against the throttle.
type CountedSend struct {
	Scope string // the key of its inbox's windows
	At    time.Time
	Cost  int // units
}

// PendingSend is one send in flight: it counts until Deadline at the
// latest.
type PendingSend struct {
	Scope    string
	Deadline time.Time
	Cost     int // units
}

// CountedSends returns, oldest first, the sends counted since since, with
// the time from which each counts. It is read at start-up, after
// ResolveInterrupted, to restore the throttle across a restart.
func (s *Store) CountedSends(ctx context.Context, since time.Time) ([]CountedSend, error) {
	var rows []struct {
		Scope     string
		CountedAt time.Time
		Cost      int
	}
	err := s.db.WithContext(ctx).Model(&SendSlot{}).Select("scope, counted_at, cost").
		Where("counted_at >= ?", utc(since)).Order("counted_at").Find(&rows).Error
	if err != nil {
		return nil, wrap(err, "counted sends since %s", since)
	}
	out := make([]CountedSend, len(rows))
	for i, r := range rows {
		out[i] = CountedSend{Scope: r.Scope, At: r.CountedAt.UTC(), Cost: r.Cost}
	}
	return out, nil
}

// PendingSends returns the sends in flight whose deadline is after now:
// what a shared throttle whose state was lost must count as in flight.
func (s *Store) PendingSends(ctx context.Context, now time.Time) ([]PendingSend, error) {
	var rows []struct {
		Scope    string
		Deadline time.Time
		Cost     int
	}
	err := s.db.WithContext(ctx).Model(&SendSlot{}).Select("scope, deadline, cost").
		Where("counted_at IS NULL AND deadline > ?", utc(now)).Order("deadline").Find(&rows).Error
	if err != nil {
		return nil, wrap(err, "pending sends at %s", now)
	}
	out := make([]PendingSend, len(rows))
	for i, r := range rows {
		out[i] = PendingSend{Scope: r.Scope, Deadline: r.Deadline.UTC(), Cost: r.Cost}
	}
	return out, nil
}

// ResolveInterrupted closes the sends a stopped server left in flight. A
// send that was waiting for the provider never went out: it is given back
// (see ResolveExpiredSends). Any other may have gone out at any moment
// until its deadline, or until the server stopped, which was before now:
// it counts from the earlier of the two, for good, so a second restart
// still counts it, and every message still sending is marked failed with
// an error saying delivery is unknown. It returns how many sends it
// resolved. It must run before the server sends, while nothing of this
// process is in flight.
func (s *Store) ResolveInterrupted(ctx context.Context, now time.Time, lane LaneJob) (int64, error) {
	n, err := s.recover(ctx, recovery{now: now, lane: lane, everySending: true,
		countAt: gorm.Expr("CASE WHEN deadline < ? THEN deadline ELSE ? END", utc(now), utc(now)),
		slots:   func(db *gorm.DB) *gorm.DB { return db }})
	return n, wrap(err, "resolve interrupted sends")
}

// PruneSendLog deletes the counted sends older than before, which no window
// can count any more, and returns how many it deleted.
func (s *Store) PruneSendLog(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("counted_at < ?", utc(before)).Delete(&SendSlot{})
	return res.RowsAffected, wrap(res.Error, "prune send log")
}
