package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// ExpiredError is what a held message that waited too long records.
const ExpiredError = "expired: the message could not be sent within QUEUE_MAX_AGE of becoming due; it was not sent"

// ExpireHeld fails, as ExpiredError, every held message (scheduled or
// queued) that became due (its scheduled time, or its acceptance) before
// before, and returns how many. Each one's version goes up, so a job
// dispatched for it as it was claims nothing. One statement, on the held
// messages' partial index: cheap enough to run every second.
func (s *Store) ExpireHeld(ctx context.Context, before time.Time) (int64, error) {
	// The statuses are written out, not parameters, so that PostgreSQL's
	// generic plan of the prepared statement can use the partial index.
	res := s.db.WithContext(ctx).Model(&Message{}).
		Where("status IN ('"+StatusScheduled+"', '"+StatusQueued+"') AND COALESCE(scheduled_at, created_at) < ?", utc(before)).
		Updates(map[string]any{"status": StatusFailed, "error": ExpiredError, "next_attempt_at": nil,
			"version": gorm.Expr("version + 1")})
	return res.RowsAffected, wrap(res.Error, "expire held messages due before %s", before)
}
