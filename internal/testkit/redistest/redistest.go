// Package redistest gives tests a Redis of their own: the server named by
// REDIS_URL (default redis://127.0.0.1:6379/0) and a key prefix owned by
// the test, whose keys are deleted when it ends.
//
// Redis is not optional where a test needs it: like PostgreSQL in testdb,
// a test that cannot reach it fails with how to start it, never skips.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultURL is the Redis used when REDIS_URL is unset.
const DefaultURL = "redis://127.0.0.1:6379/0"

// URL returns REDIS_URL or DefaultURL.
func URL() string {
	if u := os.Getenv("REDIS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Client returns a client of URL() that the test closes, after checking the
// server answers.
func Client(t testing.TB) *redis.Client {
	t.Helper()
	o, err := redis.ParseURL(URL())
	if err != nil {
		t.Fatalf("REDIS_URL: %v", err)
	}
	c := redis.NewClient(o)
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("Redis at %s does not answer (%v). Start it with scripts/ensure-redis.sh "+
			"(or `redis-server --daemonize yes`), or point REDIS_URL at one.", URL(), err)
	}
	return c
}

// Prefix returns a key prefix of this test's own; every key under it
// (hash tag included) is deleted when the test ends.
func Prefix(t testing.TB) string {
	t.Helper()
	c := Client(t)
	b := make([]byte, 6)
	rand.Read(b)
	p := "nornweave-test:" + hex.EncodeToString(b)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		iter := c.Scan(ctx, 0, "*"+p+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Errorf("clean up Redis keys %s*: %v", p, err)
		}
	})
	return p
}
