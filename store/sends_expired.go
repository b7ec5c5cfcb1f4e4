package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// ResolveExpiredSends closes the sends still in flight whose deadline was
// before before: a live server settles every send by its deadline, so these
// belong to a server that died. It does for one send what
// ResolveInterrupted does at a restart — counts it at its deadline and
// marks its message failed, delivery unknown — but leaves alone the sends
// of servers still running, which ResolveInterrupted cannot when several
// servers share the database. It returns how many it resolved. Safe to run
// on every server at once.
func (s *Store) ResolveExpiredSends(ctx context.Context, before time.Time) (int64, error) {
	before = utc(before)
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var ids []string
		if err := tx.Model(&SendSlot{}).Where("counted_at IS NULL AND deadline < ?", before).
			Pluck("id", &ids).Error; err != nil || len(ids) == 0 {
			return err
		}
		res := tx.Model(&SendSlot{}).Where("id IN ? AND counted_at IS NULL", ids).
			Update("counted_at", gorm.Expr("deadline"))
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Model(&Message{}).Where("id IN ? AND status = ?", ids, StatusSending).
			Updates(map[string]any{"status": StatusFailed, "error": interruptedError}).Error
	})
	return n, wrap(err, "resolve expired sends")
}
