package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// IdempotencyKey is a row of idempotency_keys: the first request made with
// an Idempotency-Key, and once it has finished, the response to replay.
type IdempotencyKey struct {
	Key         string `gorm:"primaryKey"`
	RequestHash string
	// Owner names the server process that claimed the key; a key still in
	// flight under another owner was abandoned by a stopped process.
	Owner string
	// MessageID is the id the send was given before it started, so that an
	// abandoned request can be told apart: its message exists or not.
	MessageID    string
	StatusCode   *int // nil while the first request is in flight
	ResponseBody *string
	CreatedAt    time.Time
}

// claimTries bounds how often a claim races a holder that gives the key
// back between the insert and the read.
const claimTries = 8

// ClaimIdempotencyKey stores k unless its key is already taken by a row
// created at or after notBefore; an older row has expired and is replaced.
// It returns nil if k was stored, or the row that holds the key. A holder
// that gives the key back between the conflicting insert and the read
// makes it try again: the key is free then, and the caller's request must
// not see the holder's absence as a missing resource.
func (s *Store) ClaimIdempotencyKey(ctx context.Context, k *IdempotencyKey, notBefore time.Time) (*IdempotencyKey, error) {
	k.CreatedAt = utc(k.CreatedAt)
	db := s.db.WithContext(ctx)
	if err := db.Where("key = ? AND created_at < ?", k.Key, utc(notBefore)).Delete(&IdempotencyKey{}).Error; err != nil {
		return nil, wrap(err, "expire idempotency key")
	}
	for range claimTries {
		res := db.Clauses(clause.OnConflict{DoNothing: true}).Create(k)
		if res.Error != nil {
			return nil, wrap(res.Error, "claim idempotency key")
		}
		if res.RowsAffected == 1 {
			return nil, nil
		}
		var held IdempotencyKey
		err := db.Where("key = ?", k.Key).Take(&held).Error
		if err == nil {
			return &held, nil
		}
		if !errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, wrap(err, "idempotency key")
		}
	}
	return nil, fmt.Errorf("store: claim idempotency key: given back and taken again %d times; try again", claimTries)
}

// CompleteIdempotencyKey stores the response of the request that holds key.
func (s *Store) CompleteIdempotencyKey(ctx context.Context, key string, status int, body string) error {
	err := s.db.WithContext(ctx).Model(&IdempotencyKey{}).Where("key = ?", key).
		Updates(map[string]any{"status_code": status, "response_body": body}).Error
	return wrap(err, "complete idempotency key")
}

// ReleaseIdempotencyKey deletes key if owner still holds it in flight, so
// that the request may be made again.
func (s *Store) ReleaseIdempotencyKey(ctx context.Context, key, owner string) error {
	err := s.db.WithContext(ctx).Where("key = ? AND owner = ? AND status_code IS NULL", key, owner).
		Delete(&IdempotencyKey{}).Error
	return wrap(err, "release idempotency key")
}

// PruneIdempotencyKeys deletes the keys created before before.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", utc(before)).Delete(&IdempotencyKey{})
	return res.RowsAffected, wrap(res.Error, "prune idempotency keys")
}
