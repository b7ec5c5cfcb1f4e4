package store

import (
	"context"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// ThrottleIdentity is the row of throttle_identity: the throttle the
// servers running on this database share. A server that would keep
// another throttle (another backend, Redis, prefix, limits, lease or fail
// policy) beside them is refused at start-up.
type ThrottleIdentity struct {
	ID      int `gorm:"primaryKey"` // always 1
	Backend string
	// BackendIdentity is the identity the backend keeps (redisthrottle.
	// Identity, pgthrottle.Identity); "" with the in-memory throttle.
	BackendIdentity string
	RedisTarget     string // host:port/db of REDIS_URL, no credentials, for the messages; "" unless redis
	RedisPrefix     string // "" unless redis
	// The limits, 0 for unlimited. The second and the day (migration
	// 0016) read 0 in an identity recorded before them.
	GlobalPerSecond int
	GlobalPerMinute int
	GlobalPerHour   int
	GlobalPerDay    int
	InboxPerMinute  int
	InboxPerHour    int
	InboxPerDay     int
	// What makes the lease another server waits out (SEND_TIMEOUT,
	// SEND_RETRY_DEADLINE), and THROTTLE_FAIL.
	SendTimeoutMS       int64 `gorm:"column:send_timeout_ms"`
	SendRetryDeadlineMS int64 `gorm:"column:send_retry_deadline_ms"`
	ThrottleFail        string
	// The size limits, which make the longest lease: how long another
	// server waits out an Idempotency-Key's claim, or held mail's job.
	AttachmentMaxTotalSizeMB int `gorm:"column:attachment_max_total_size_mb"`
	BodyMaxSizeMB            int `gorm:"column:body_max_size_mb"`
	HTMLMaxSizeMB            int `gorm:"column:html_max_size_mb"`
	// Version moves with every change, so that running servers notice one.
	Version   int64
	ChangedAt time.Time
	ChangedBy string // what changed it: a server's start, or `nornweave limits set`
}

// TableName implements gorm's tabler.
func (ThrottleIdentity) TableName() string { return "throttle_identity" }

// ThrottleIdentity returns the recorded identity, or ErrNotFound before any
// server has recorded one.
func (s *Store) ThrottleIdentity(ctx context.Context) (*ThrottleIdentity, error) {
	var id ThrottleIdentity
	if err := s.db.WithContext(ctx).Where("id = 1").Take(&id).Error; err != nil {
		return nil, wrap(err, "throttle identity")
	}
	id.ChangedAt = id.ChangedAt.UTC()
	return &id, nil
}

// SetThrottleIdentity records id as the identity, moving its version past
// the one recorded (one statement, so two writers cannot both take the
// same version), and returns it as stored.
func (s *Store) SetThrottleIdentity(ctx context.Context, id ThrottleIdentity) (*ThrottleIdentity, error) {
	id.ID, id.Version, id.ChangedAt = 1, 1, utc(id.ChangedAt)
	err := s.db.WithContext(ctx).Clauses(clause.OnConflict{
		Columns: []clause.Column{{Name: "id"}},
		DoUpdates: clause.Assignments(map[string]any{
			"backend": id.Backend, "backend_identity": id.BackendIdentity,
			"redis_target": id.RedisTarget, "redis_prefix": id.RedisPrefix,
			"send_timeout_ms": id.SendTimeoutMS, "send_retry_deadline_ms": id.SendRetryDeadlineMS,
			"throttle_fail":                id.ThrottleFail,
			"attachment_max_total_size_mb": id.AttachmentMaxTotalSizeMB,
			"body_max_size_mb":             id.BodyMaxSizeMB, "html_max_size_mb": id.HTMLMaxSizeMB,
			"global_per_second": id.GlobalPerSecond, "global_per_day": id.GlobalPerDay,
			"global_per_minute": id.GlobalPerMinute, "global_per_hour": id.GlobalPerHour,
			"inbox_per_minute": id.InboxPerMinute, "inbox_per_hour": id.InboxPerHour,
			"inbox_per_day": id.InboxPerDay,
			"changed_at":    id.ChangedAt, "changed_by": id.ChangedBy,
			"version": gorm.Expr("throttle_identity.version + 1"),
		}),
	}).Create(&id).Error
	if err != nil {
		return nil, wrap(err, "set throttle identity")
	}
	return s.ThrottleIdentity(ctx)
}
