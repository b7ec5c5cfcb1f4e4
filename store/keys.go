package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"gorm.io/gorm/clause"
)

// ServerKey is a row of server_keys: a secret every server on the database
// shares.
type ServerKey struct {
	Name      string `gorm:"primaryKey"`
	Value     string // hex
	CreatedAt time.Time
}

// serverKeyLen is the length of a key ServerKeyFor makes: 256 bits.
const serverKeyLen = 32

// ServerKeyFor returns the key named name, made at random and stored by
// the first server that asks: every server on the database gets the same
// one, and keeps it across restarts.
func (s *Store) ServerKeyFor(ctx context.Context, name string) ([]byte, error) {
	fresh := make([]byte, serverKeyLen)
	if _, err := rand.Read(fresh); err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	k := ServerKey{Name: name, Value: hex.EncodeToString(fresh), CreatedAt: utc(time.Now())}
	if err := db.Clauses(clause.OnConflict{DoNothing: true}).Create(&k).Error; err != nil {
		return nil, wrap(err, "create server key %s", name)
	}
	var held ServerKey
	if err := db.Where("name = ?", name).Take(&held).Error; err != nil {
		return nil, wrap(err, "server key %s", name)
	}
	return hex.DecodeString(held.Value)
}
