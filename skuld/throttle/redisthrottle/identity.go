package redisthrottle

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// Identity is the identity of one Redis throttle: a random value kept in
// the key "{prefix}:identity", so that servers agree they share a throttle
// when they see the same Redis, database and prefix, however REDIS_URL
// spells it. The server that finds the key missing while alone on its
// database writes it (Keep); the others only Read it.
type Identity struct {
	rdb redis.UniversalClient
	key string
}

// NewIdentity returns the identity of the throttle New(rdb, prefix, …)
// would use.
func NewIdentity(rdb redis.UniversalClient, prefix string) Identity {
	return Identity{rdb: rdb, key: identityKey(newDriver(rdb, prefix).prefix)}
}

// identityKey is the identity's key under a driver's "{prefix}". A
// Restore that replaces the state keeps it: it names the Redis, not the
// state.
func identityKey(tag string) string { return tag + ":identity" }

// Read returns the identity, or "" when the key is missing (another
// Redis, database or prefix, or one that lost its data).
func (i Identity) Read(ctx context.Context) (string, error) {
	v, err := i.rdb.Get(ctx, i.key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("redisthrottle: read identity: %w", err)
	}
	return v, nil
}

// Keep writes id unless an identity is already there (SET NX), and
// returns the one there afterwards. (Two calls, not SET NX GET: that needs
// Redis 7.)
func (i Identity) Keep(ctx context.Context, id string) (string, error) {
	if err := i.rdb.SetNX(ctx, i.key, id, 0).Err(); err != nil {
		return "", fmt.Errorf("redisthrottle: keep identity: %w", err)
	}
	return i.Read(ctx)
}
