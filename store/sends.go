package store

import (
	"context"
	"slices"
	"time"
)

// interruptedError is recorded on sends that a stopped server left
// unfinished. The provider may or may not have delivered them.
const interruptedError = "interrupted: the server stopped before the provider answered; delivery unknown"

// SendTimes returns, oldest first, the times of the sends that count
// against the throttle since since: the sent_at of messages sent, and the
// created_at of messages still sending. A crash in the middle of a send may
// have delivered it, so counting it is the safe side. It is used at start-up
// to restore the throttle across a restart.
func (s *Store) SendTimes(ctx context.Context, since time.Time) ([]time.Time, error) {
	since = utc(since)
	var rows []struct {
		Status    string
		CreatedAt time.Time
		SentAt    *time.Time
	}
	err := s.db.WithContext(ctx).Model(&Message{}).Select("status, created_at, sent_at").
		Where("(status = ? AND sent_at >= ?) OR (status = ? AND created_at >= ?)",
			StatusSent, since, StatusSending, since).
		Find(&rows).Error
	if err != nil {
		return nil, wrap(err, "send times since %s", since)
	}
	times := make([]time.Time, 0, len(rows))
	for _, r := range rows {
		if r.Status == StatusSent && r.SentAt != nil {
			times = append(times, r.SentAt.UTC())
		} else {
			times = append(times, r.CreatedAt.UTC())
		}
	}
	slices.SortFunc(times, time.Time.Compare)
	return times, nil
}

// FailStaleSending marks the messages still sending that were created
// before before as failed, with an error saying delivery is unknown, and
// returns how many it marked. At start-up, with before set to the start
// time, it closes the sends a previous run left open.
func (s *Store) FailStaleSending(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Model(&Message{}).
		Where("status = ? AND created_at < ?", StatusSending, utc(before)).
		Updates(map[string]any{"status": StatusFailed, "error": interruptedError})
	if res.Error != nil {
		return 0, wrap(res.Error, "fail stale sending messages")
	}
	return res.RowsAffected, nil
}
