package app

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/store"
)

// backendIdentity is the identity a shared throttle backend keeps of its
// own (redisthrottle.Identity, pgthrottle.Identity): servers share a
// throttle when they read the same one.
type backendIdentity interface {
	// Read returns the identity, "" when the backend has none.
	Read(ctx context.Context) (string, error)
	// Keep writes id unless the backend has one, and returns the one it has.
	Keep(ctx context.Context, id string) (string, error)
}

// sharedBackend is what a server opens of its shared backend before it
// joins the database, apart from the throttle itself.
type sharedBackend struct {
	identity backendIdentity // nil with the in-memory throttle
	close    func() error    // releases what backendOf opened
}

// backendOf opens what a server needs of its shared backend before it
// joins the database: the backend's identity, and for Redis its eviction
// policy checked (refused unless noeviction or REDIS_ALLOW_EVICTION; a
// warning where CONFIG is disabled).
func backendOf(ctx context.Context, cfg config.Config, st *store.Store, logger *slog.Logger) (*sharedBackend, error) {
	none := func() error { return nil }
	switch cfg.ThrottleBackend {
	case "postgres":
		return &sharedBackend{identity: pgthrottle.NewIdentity(st.SQL()), close: none}, nil
	case "redis":
		rdb, err := redisthrottle.NewClient(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		switch r := checkEviction(ctx, rdb, cfg.RedisAllowEviction); r.Status {
		case CheckFail:
			rdb.Close()
			return nil, fmt.Errorf("THROTTLE_BACKEND=redis (%s): %w", redisTarget(cfg.RedisURL), r.Err)
		case CheckWarn:
			logger.Warn("redis may evict the throttle's keys", slog.String("detail", r.Detail), slog.Any("error", r.Err))
		}
		return &sharedBackend{identity: redisthrottle.NewIdentity(rdb, cfg.RedisKeyPrefix), close: rdb.Close}, nil
	}
	return &sharedBackend{close: none}, nil
}

// newBackendID is a fresh random identity (128 bits) for a backend that
// has none.
func newBackendID() string { return rand.Text() }

// checkEviction reads Redis's maxmemory-policy. Anything but noeviction
// fails (each key evicted is throttle state lost: a rebuild from the send
// record, meanwhile sends in flight elsewhere counted only at their
// lease), unless allow (REDIS_ALLOW_EVICTION=true) accepts it; a Redis
// that refuses CONFIG (a managed one) warns, saying what to check. A
// Redis that does not answer fails.
func checkEviction(ctx context.Context, rdb *redis.Client, allow bool) CheckResult {
	res, err := rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	var refused redis.Error
	switch {
	case errors.As(err, &refused):
		return CheckResult{Status: CheckWarn, Detail: "maxmemory-policy unknown (CONFIG GET refused)",
			Err: fmt.Errorf("this Redis does not answer CONFIG GET maxmemory-policy (%v): check its "+
				"maxmemory-policy in your provider's settings; it must be noeviction, or an evicted key "+
				"loses throttle state (set REDIS_ALLOW_EVICTION=true to accept that)", err)}
	case err != nil:
		return CheckResult{Status: CheckFail, Detail: "not reachable",
			Err: fmt.Errorf("cannot reach it to read its maxmemory-policy (and at start, its identity): %w", err)}
	}
	policy := res["maxmemory-policy"]
	detail := "maxmemory-policy " + policy
	switch {
	case policy == "noeviction":
		return CheckResult{Detail: detail}
	case allow:
		return CheckResult{Status: CheckWarn, Detail: detail + " (REDIS_ALLOW_EVICTION=true)",
			Err: errors.New("this Redis may evict the throttle's keys: each key evicted is throttle state lost and rebuilt from the send record")}
	}
	return CheckResult{Status: CheckFail, Detail: detail, Err: fmt.Errorf("this Redis's maxmemory-policy is %q: "+
		"under memory pressure it evicts keys, and each key evicted is throttle state lost, rebuilt from "+
		"the send record (meanwhile the sends in flight on other servers hold their room until the end of their "+
		"lease). Set maxmemory-policy noeviction on this Redis, or REDIS_ALLOW_EVICTION=true to accept "+
		"the rebuilds", policy)}
}

// msDuration words a recorded duration in milliseconds as its variable
// takes it ("1m0s"); "" for a row recorded before it was (0).
func msDuration(ms int64) string {
	if ms == 0 {
		return ""
	}
	return (time.Duration(ms) * time.Millisecond).String()
}

// otherBackend refuses a server whose backend does not hold the identity
// the servers running on its database recorded: missing reports none at
// all.
func otherBackend(mine store.ThrottleIdentity, theirs *store.ThrottleIdentity, missing bool) error {
	var b strings.Builder
	if mine.Backend == "redis" {
		fmt.Fprintf(&b, "\n  REDIS_URL is %q and REDIS_KEY_PREFIX %q here, but the servers running on this "+
			"database use %q and %q (recorded %s by %s)", mine.RedisTarget, mine.RedisPrefix,
			theirs.RedisTarget, theirs.RedisPrefix, theirs.ChangedAt.Format(time.RFC3339), theirs.ChangedBy)
	}
	switch {
	case missing && mine.Backend == "redis":
		b.WriteString(",\n  and this Redis has no throttle identity under this prefix: it is another Redis, " +
			"another database number or another prefix than theirs, or theirs after it lost its data " +
			"(FLUSHDB, a restart without persistence). In the last case the running servers write the " +
			"identity back within a few seconds: try again. Otherwise set the REDIS_URL and " +
			"REDIS_KEY_PREFIX they use (another spelling of the same Redis is fine)")
	case mine.Backend == "redis":
		b.WriteString(",\n  and this Redis holds another throttle's identity under this prefix: it is another " +
			"Redis, another database number or another prefix than theirs. Set the REDIS_URL and " +
			"REDIS_KEY_PREFIX they use (another spelling of the same Redis is fine)")
	default:
		b.WriteString("\n  the pgthrottle_identity row of this database is missing or differs from the one " +
			"recorded; the running servers write it back within a few seconds: try again")
	}
	return fmt.Errorf("%w:%s", ErrThrottleMismatch, b.String())
}
