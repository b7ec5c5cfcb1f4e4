package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/redisthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
	"github.com/nornweave/nornweave/store"
)

// throttleParts is the send throttle THROTTLE_BACKEND chose, with what must
// be closed with the app.
type throttleParts struct {
	throttle.Throttle // what the pipeline and the API use (FailOpen under THROTTLE_FAIL=open)
	backend           string
	limiter           *throttle.GlobalRateLimiter // memory
	shared            *shared.Throttle            // postgres, redis
	failOpen          *throttle.FailOpen          // THROTTLE_FAIL=open
	pool              *pgxpool.Pool               // postgres: the throttle's own small pool
	redis             *redis.Client               // redis

	closeOnce sync.Once
	closeErr  error
}

// sharedPoolSize bounds the throttle's PostgreSQL connections per server:
// admissions serialize on one advisory lock, so more would only queue.
const sharedPoolSize = 4

// pgthrottleSchema is the shared PostgreSQL throttle's own tables, which
// the store migrates after the app's (any backend: a switch to postgres
// then needs no migration).
var pgthrottleSchema = store.Schema{Name: "pgthrottle", Migrate: pgthrottle.Migrate, Current: pgthrottle.Current}

// benchLayers is empty in every shipped build: scripts/bench-layers.sh sets
// it with -ldflags -X to build servers without the admissions batcher
// ("gather", "none": MaxBatch 1) or the commit gatherer ("batch", "none":
// SettleDelay < 0), to measure what each layer keeps (issue 27).
var benchLayers string

// newThrottle builds the configured throttle. A shared backend is wrapped
// by the THROTTLE_FAIL policy: open admits when the backend cannot be
// asked; closed lets the error reach the API (503). rebuild replaces a
// shared backend's state with the send record: its servers have just
// moved to it.
func newThrottle(ctx context.Context, cfg config.Config, st *store.Store, c clock.Clock, rebuild bool,
	logger *slog.Logger) (*throttleParts, error) {
	global, inbox := configLimits(cfg)
	t := &throttleParts{backend: cfg.ThrottleBackend}
	if !cfg.SharedThrottle() {
		t.backend = "memory"
		t.limiter = throttle.NewGlobalRateLimiter(global, inbox)
		t.Throttle = throttle.NewMemory(t.limiter, c)
		return t, nil
	}
	o := shared.Options{Global: global, Inbox: inbox, Clock: c, Logger: logger,
		Rebuild: func(ctx context.Context) (throttledriver.Record, error) {
			return skuld.ThrottleRecord(ctx, st, c.Now(), shared.DefaultLeaseMargin)
		}}
	if benchLayers != "" {
		o.MaxBatch, o.SettleDelay = benchLayerOptions(benchLayers)
		logger.Warn("throttle layers set by a benchmark build", slog.String("layers", benchLayers))
	}
	switch cfg.ThrottleBackend {
	case "postgres":
		pool, err := pgthrottle.OpenPool(ctx, cfg.PostgresURL(), sharedPoolSize)
		if err != nil {
			return nil, fmt.Errorf("THROTTLE_BACKEND=postgres: %w", err)
		}
		t.pool, t.shared = pool, pgthrottle.New(pool, o)
	case "redis":
		rdb, err := redisthrottle.NewClient(cfg.RedisURL)
		if err != nil {
			return nil, err
		}
		t.redis, t.shared = rdb, redisthrottle.New(rdb, cfg.RedisKeyPrefix, o)
	}
	t.Throttle = t.shared
	if rebuild {
		if err := t.shared.Rebuild(ctx); err != nil {
			t.Close()
			return nil, fmt.Errorf("THROTTLE_BACKEND=%s: rebuild its state from the send record: %w", cfg.ThrottleBackend, err)
		}
	}
	if _, err := t.shared.State(ctx, "", throttle.Override{}); err != nil {
		// Not fatal: the fail policy covers a backend that is down, at
		// start as later.
		logger.Error("throttle backend not reachable at start", slog.String("backend", cfg.ThrottleBackend),
			slog.String("throttle_fail", cfg.ThrottleFail), slog.Any("error", err))
	}
	if cfg.ThrottleFail == "open" {
		t.failOpen = throttle.NewFailOpen(t.shared, logger)
		t.Throttle = t.failOpen
	}
	logger.Info("throttle shared", slog.String("backend", cfg.ThrottleBackend), slog.String("throttle_fail", cfg.ThrottleFail))
	return t, nil
}

// configLimits are the configuration's global limits and inbox defaults.
func configLimits(cfg config.Config) (global, inbox throttle.Limits) {
	return throttle.Limits{PerSecond: cfg.SendRateLimitPerSecond, PerMinute: cfg.SendRateLimitPerMinute,
			PerHour: cfg.SendRateLimitPerHour, PerDay: cfg.SendRateLimitPerDay},
		throttle.Limits{PerMinute: cfg.InboxSendRateLimitPerMinute, PerHour: cfg.InboxSendRateLimitPerHour,
			PerDay: cfg.InboxSendRateLimitPerDay}
}

// SetLimits changes the limits of the running throttle.
func (t *throttleParts) SetLimits(global, inbox throttle.Limits) {
	if t.limiter != nil {
		t.limiter.SetLimits(global, inbox)
	}
	if t.shared != nil {
		t.shared.SetLimits(global, inbox)
	}
}

// Unthrottled is the number of sends admitted without the backend under
// THROTTLE_FAIL=open.
func (t *throttleParts) Unthrottled() int64 {
	if t.failOpen == nil {
		return 0
	}
	return t.failOpen.Unthrottled()
}

// Close sends what the throttle holds and releases what newThrottle took;
// safe on nil and twice.
func (t *throttleParts) Close() error {
	if t == nil {
		return nil
	}
	t.closeOnce.Do(func() {
		var errs []error
		if t.shared != nil {
			// The last commits and releases; lost, they would count
			// until their reservations' deadlines.
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			errs = append(errs, t.shared.Close(ctx))
			cancel()
		}
		if t.pool != nil {
			t.pool.Close()
		}
		if t.redis != nil {
			errs = append(errs, t.redis.Close())
		}
		t.closeErr = errors.Join(errs...)
	})
	return t.closeErr
}

// benchLayerOptions maps benchLayers to the options that turn layers off.
func benchLayerOptions(layers string) (maxBatch int, settleDelay time.Duration) {
	if layers == "none" || layers == "gather" {
		maxBatch = 1
	}
	if layers == "none" || layers == "batch" {
		settleDelay = -1
	}
	return maxBatch, settleDelay
}
