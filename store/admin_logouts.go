package store

import (
	"context"
	"time"

	"gorm.io/gorm/clause"
)

// AdminLogout is a row of admin_logouts: a dashboard session logged out,
// kept until its cookie would have expired.
type AdminLogout struct {
	ID        string `gorm:"primaryKey"` // the session id, as the dashboard encodes it
	ExpiresAt time.Time
}

// CreateAdminLogout records that session id, valid until exp, was logged
// out. Logging out a session twice is not an error: the first row stays.
func (s *Store) CreateAdminLogout(ctx context.Context, id string, exp time.Time) error {
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).
		Create(&AdminLogout{ID: id, ExpiresAt: utc(exp)}).Error
	return wrap(err, "create admin logout")
}

// AdminLoggedOut reports whether session id was logged out.
func (s *Store) AdminLoggedOut(ctx context.Context, id string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Model(&AdminLogout{}).Where("id = ?", id).Limit(1).Count(&n).Error
	return n > 0, wrap(err, "admin logout %s", id)
}

// PruneAdminLogouts deletes the logouts of sessions expired before
// before: their cookies are refused for their expiry anyway.
func (s *Store) PruneAdminLogouts(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("expires_at < ?", utc(before)).Delete(&AdminLogout{})
	return res.RowsAffected, wrap(res.Error, "prune admin logouts")
}
