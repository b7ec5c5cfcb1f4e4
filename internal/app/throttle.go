package app

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// throttle is the send throttle THROTTLE_BACKEND chose, with what must be
// closed with the app.
type throttle struct {
	skuld.Throttle
	lock *store.ServerLock // memory on PostgreSQL: this server is the only one
	db   *sql.DB           // postgres: the throttle's own small pool
	// The shared backends gather commits: sent on Close.
	flusher interface{ Flush(context.Context) error }
	redis   *redis.Client // redis

	closeOnce sync.Once
	closeErr  error
}

// sharedPoolSize bounds the throttle's PostgreSQL connections per server:
// admissions serialize on one advisory lock, so more would only queue.
const sharedPoolSize = 4

// newThrottle builds the configured throttle. With the in-memory throttle
// on PostgreSQL it takes the single-server lock, so that a second server on
// the same database is refused at start-up instead of sending with a full
// quota of its own. A shared backend is wrapped by the THROTTLE_FAIL
// policy: open admits when the backend cannot be asked; closed lets the
// error reach the API (503).
func newThrottle(ctx context.Context, cfg config.Config, st *store.Store, mem *skuld.GlobalRateLimiter,
	c skuld.Clock, logger *slog.Logger) (*throttle, error) {
	t := &throttle{}
	global := skuld.Limits{PerMinute: cfg.SendRateLimitPerMinute, PerHour: cfg.SendRateLimitPerHour}
	inbox := skuld.Limits{PerMinute: cfg.InboxSendRateLimitPerMinute, PerHour: cfg.InboxSendRateLimitPerHour}
	switch cfg.ThrottleBackend {
	case "postgres":
		db, err := skuld.OpenPostgresThrottleDB(cfg.PostgresURL(), sharedPoolSize)
		if err != nil {
			return nil, fmt.Errorf("THROTTLE_BACKEND=postgres: %w", err)
		}
		t.db = db
		pg := skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: global, Inbox: inbox})
		t.Throttle, t.flusher = pg, pg
	case "redis":
		rdb, err := skuld.NewRedisClient(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		t.redis = rdb
		rt := skuld.NewRedisThrottle(rdb, skuld.RedisOptions{Global: global, Inbox: inbox,
			KeyPrefix: cfg.RedisKeyPrefix})
		t.Throttle, t.flusher = rt, rt
	default:
		lock, err := st.SingleServer(ctx)
		if err != nil {
			if errors.Is(err, store.ErrAnotherServer) {
				logger.Error("refusing to start", slog.Any("error", err))
			}
			return nil, err
		}
		t.lock = lock
		t.Throttle = skuld.NewMemoryThrottle(mem, c)
		return t, nil
	}
	if err := t.check(ctx); err != nil {
		// Not fatal: the fail policy covers a backend that is down, at
		// start as later.
		logger.Error("throttle backend not reachable at start", slog.String("backend", cfg.ThrottleBackend),
			slog.String("throttle_fail", cfg.ThrottleFail), slog.Any("error", err))
	}
	if cfg.ThrottleFail == "open" {
		t.Throttle = skuld.NewFailOpen(t.Throttle, logger)
	}
	logger.Info("throttle shared", slog.String("backend", cfg.ThrottleBackend), slog.String("throttle_fail", cfg.ThrottleFail))
	return t, nil
}

// check asks the shared backend once.
func (t *throttle) check(ctx context.Context) error {
	_, err := t.State(ctx)
	return err
}

// shared reports a backend other than memory.
func (t *throttle) shared() bool { return t != nil && (t.db != nil || t.redis != nil) }

// Close releases what newThrottle took; safe on nil and twice.
func (t *throttle) Close() error {
	if t == nil {
		return nil
	}
	t.closeOnce.Do(func() {
		errs := []error{t.lock.Release()}
		if t.flusher != nil {
			// The last commits and releases; lost, they would count
			// until their reservations' deadlines.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, t.flusher.Flush(ctx))
			cancel()
		}
		if t.db != nil {
			errs = append(errs, t.db.Close())
		}
		if t.redis != nil {
			errs = append(errs, t.redis.Close())
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// keyLease is, with a shared backend, how long another server may still be
// working on an Idempotency-Key it claimed: the longest a send can take
// (the retry deadline, the default attempt timeout, the transfer of the
// largest message allowed, base64 included) and a minute for the rest of
// the request. With the in-memory throttle there is one server: 0.
func (t *throttle) keyLease(cfg config.Config) time.Duration {
	if !t.shared() {
		return 0
	}
	largest := cfg.AttachmentMaxTotalSizeMB << 20 * 4 / 3
	return cfg.SendRetryDeadline + time.Minute + providers.TransferAllowance(largest) + time.Minute
}
