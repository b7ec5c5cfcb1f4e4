package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/store"
)

// Servers that do not share one throttle must not run on one database:
// each would allow the full limit. Every server records the throttle it
// uses in the database (store.ThrottleIdentity) and holds the server lock:
// exclusively with the in-memory throttle (it must be alone), shared with a
// shared backend. A server alone on the database records its own identity,
// logging what changed; one joining others must agree with theirs, or it
// refuses to start, naming the variable and the value they use. A shared
// backend keeps an identity of its own (backendIdentity): the server alone
// writes it if missing and records it; one joining must read the same.

// joinWait is how long a server sharing a backend waits for another that
// is starting (holding the lock exclusively for a moment) before refusing.
const joinWait = 10 * time.Second

// identityOf is the identity cfg gives this server's throttle.
func identityOf(cfg config.Config) store.ThrottleIdentity {
	id := store.ThrottleIdentity{Backend: cfg.ThrottleBackend,
		GlobalPerSecond: cfg.SendRateLimitPerSecond, GlobalPerMinute: cfg.SendRateLimitPerMinute,
		GlobalPerHour: cfg.SendRateLimitPerHour, GlobalPerDay: cfg.SendRateLimitPerDay,
		InboxPerMinute: cfg.InboxSendRateLimitPerMinute, InboxPerHour: cfg.InboxSendRateLimitPerHour,
		InboxPerDay: cfg.InboxSendRateLimitPerDay}
	if !cfg.SharedThrottle() {
		id.Backend = "memory"
	} else {
		id.ThrottleFail = cfg.ThrottleFail
		id.AttachmentMaxTotalSizeMB, id.BodyMaxSizeMB, id.HTMLMaxSizeMB =
			cfg.AttachmentMaxTotalSizeMB, cfg.BodyMaxSizeMB, cfg.HTMLMaxSizeMB
	}
	id.SendTimeoutMS, id.SendRetryDeadlineMS = cfg.SendTimeout.Milliseconds(), cfg.SendRetryDeadline.Milliseconds()
	if id.Backend == "redis" {
		id.RedisTarget, id.RedisPrefix = redisTarget(cfg.RedisURL), cfg.RedisKeyPrefix
	}
	return id
}

// redisTarget names the Redis of url without its credentials: host:port/db,
// or the socket's path.
func redisTarget(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "?"
	}
	if u.Scheme == "unix" {
		return "unix:" + u.Path
	}
	db := strings.TrimPrefix(u.Path, "/")
	if db == "" {
		db = u.Query().Get("db")
	}
	if db == "" {
		db = "0"
	}
	return u.Host + "/" + db
}

// disagreement is one variable on which two identities differ.
type disagreement struct{ variable, mine, theirs string }

// differences lists where mine differs from theirs, among the settings
// another server may rely on (the backend's own identity is compared
// apart: sameBackend).
func differences(mine, theirs store.ThrottleIdentity) []disagreement {
	var out []disagreement
	add := func(variable string, a, b any) {
		if sa, sb := fmt.Sprint(a), fmt.Sprint(b); sa != sb {
			out = append(out, disagreement{variable, sa, sb})
		}
	}
	add("THROTTLE_BACKEND", mine.Backend, theirs.Backend)
	add("GLOBAL_SEND_RATE_LIMIT_PER_SECOND", mine.GlobalPerSecond, theirs.GlobalPerSecond)
	add("GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", mine.GlobalPerMinute, theirs.GlobalPerMinute)
	add("GLOBAL_SEND_RATE_LIMIT_PER_HOUR", mine.GlobalPerHour, theirs.GlobalPerHour)
	add("GLOBAL_SEND_RATE_LIMIT_PER_DAY", mine.GlobalPerDay, theirs.GlobalPerDay)
	add("INBOX_SEND_RATE_LIMIT_PER_MINUTE", mine.InboxPerMinute, theirs.InboxPerMinute)
	add("INBOX_SEND_RATE_LIMIT_PER_HOUR", mine.InboxPerHour, theirs.InboxPerHour)
	add("INBOX_SEND_RATE_LIMIT_PER_DAY", mine.InboxPerDay, theirs.InboxPerDay)
	// The lease: how long another server waits out a send of this one.
	add("SEND_TIMEOUT", msDuration(mine.SendTimeoutMS), msDuration(theirs.SendTimeoutMS))
	add("SEND_RETRY_DEADLINE", msDuration(mine.SendRetryDeadlineMS), msDuration(theirs.SendRetryDeadlineMS))
	add("THROTTLE_FAIL", mine.ThrottleFail, theirs.ThrottleFail)
	add("ATTACHMENT_MAX_TOTAL_SIZE_MB", mine.AttachmentMaxTotalSizeMB, theirs.AttachmentMaxTotalSizeMB)
	add("BODY_MAX_SIZE_MB", mine.BodyMaxSizeMB, theirs.BodyMaxSizeMB)
	add("HTML_MAX_SIZE_MB", mine.HTMLMaxSizeMB, theirs.HTMLMaxSizeMB)
	return out
}

// ErrThrottleMismatch refuses a server whose throttle is not the one the
// servers running on its database share.
var ErrThrottleMismatch = errors.New("this server's throttle is not the one the servers running on this database share")

// mismatchError words the differences for the operator: each variable,
// the value here and the value the running servers use, and what to do.
func mismatchError(diffs []disagreement, theirs *store.ThrottleIdentity) error {
	var b strings.Builder
	for _, d := range diffs {
		fmt.Fprintf(&b, "\n  %s is %q here, but the servers running on this database use %q", d.variable, d.mine, d.theirs)
	}
	fmt.Fprintf(&b, "\n(recorded %s by %s). Set the same values here", theirs.ChangedAt.Format(time.RFC3339), theirs.ChangedBy)
	for _, d := range diffs {
		if strings.Contains(d.variable, "RATE_LIMIT") {
			b.WriteString(", or change the limits of every server with `nornweave limits set VARIABLE=VALUE`")
			break
		}
	}
	return fmt.Errorf("%w:%s", ErrThrottleMismatch, b.String())
}

// whoStarts names this process in ThrottleIdentity.ChangedBy.
func whoStarts() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("a server starting on %s (pid %d)", host, os.Getpid())
}

// joined is this server's place on its database, as joinDatabase took it.
type joined struct {
	lock *store.ServerLock
	// identity is the throttle identity recorded, the backend's own
	// included, which the watcher writes back into a backend that lost it.
	identity store.ThrottleIdentity
	// moved reports that the throttle's backend is not the one recorded:
	// the shared state must be rebuilt from the send record.
	moved bool
	// alone reports that no other server held the lock when this one took it.
	alone bool
}

// joinDatabase takes this server's place on the database of st: the server
// lock, and the throttle identity. backend is the shared backend's own
// identity (nil with the in-memory throttle).
func joinDatabase(ctx context.Context, cfg config.Config, st *store.Store, backend backendIdentity,
	logger *slog.Logger) (*joined, error) {
	mine := identityOf(cfg)
	lock, alone, err := st.LockAlone(ctx)
	if err != nil {
		return nil, err
	}
	if alone {
		mine, moved, err := adopt(ctx, st, mine, backend, logger)
		if err == nil && mine.Backend != "memory" {
			err = lock.Share(ctx)
		}
		if err != nil {
			lock.Release()
			return nil, err
		}
		return &joined{lock: lock, identity: mine, moved: moved, alone: true}, nil
	}
	theirs, err := st.ThrottleIdentity(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if mine.Backend == "memory" || st.Driver() != store.DriverPostgres {
		return nil, anotherServer(theirs)
	}
	deadline := time.Now().Add(joinWait)
	for {
		lock, ok, err := st.JoinShared(ctx)
		if err != nil {
			return nil, err
		}
		if ok {
			// The identity is read under the lock: a server that was
			// starting has recorded its own by now.
			if theirs, err = st.ThrottleIdentity(ctx); err == nil {
				err = agree(ctx, mine, theirs, backend)
			}
			if err != nil {
				lock.Release()
				return nil, err
			}
			mine.BackendIdentity = theirs.BackendIdentity
			return &joined{lock: lock, identity: mine}, nil
		}
		if time.Now().After(deadline) {
			return nil, anotherServer(theirs)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// agree refuses a server joining others whose settings differ from theirs,
// or whose backend does not hold the identity they recorded.
func agree(ctx context.Context, mine store.ThrottleIdentity, theirs *store.ThrottleIdentity, backend backendIdentity) error {
	if diffs := differences(mine, *theirs); len(diffs) > 0 {
		return mismatchError(diffs, theirs)
	}
	got, err := backend.Read(ctx)
	if err != nil {
		return fmt.Errorf("THROTTLE_BACKEND=%s: cannot read the backend's identity, to know it is the one the "+
			"servers running on this database share: %w", mine.Backend, err)
	}
	if got != theirs.BackendIdentity {
		return otherBackend(mine, theirs, got == "")
	}
	return nil
}

// anotherServer refuses a server that would run beside one that must be
// alone (or, on SQLite, beside any).
func anotherServer(theirs *store.ThrottleIdentity) error {
	backend := "?"
	if theirs != nil {
		backend = theirs.Backend
	}
	return fmt.Errorf("%w (it uses THROTTLE_BACKEND=%s). A server with THROTTLE_BACKEND=memory, and any on SQLite, "+
		"must be alone on its database: to run several servers on one PostgreSQL database, set "+
		"THROTTLE_BACKEND=postgres or THROTTLE_BACKEND=redis, with the same limits, on all of them", store.ErrAnotherServer, backend)
}

// adopt records mine as the identity of a database this server has to
// itself, with the backend's own (written into the backend if missing),
// logging what it changes; moved reports another backend than the one
// recorded, whose shared state must be rebuilt.
func adopt(ctx context.Context, st *store.Store, mine store.ThrottleIdentity, backend backendIdentity,
	logger *slog.Logger) (_ store.ThrottleIdentity, moved bool, err error) {
	if backend != nil {
		if mine.BackendIdentity, err = backend.Keep(ctx, newBackendID()); err != nil {
			return mine, false, fmt.Errorf("THROTTLE_BACKEND=%s: cannot read or write the backend's identity: %w",
				mine.Backend, err)
		}
	}
	theirs, err := st.ThrottleIdentity(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return mine, false, err
	}
	var diffs []disagreement
	if theirs != nil {
		diffs = differences(mine, *theirs)
		moved = theirs.Backend != mine.Backend || theirs.BackendIdentity != mine.BackendIdentity
		if len(diffs) == 0 && !moved && theirs.RedisTarget == mine.RedisTarget && theirs.RedisPrefix == mine.RedisPrefix {
			return mine, false, nil
		}
	}
	mine.ChangedAt, mine.ChangedBy = time.Now(), whoStarts()
	if _, err := st.SetThrottleIdentity(ctx, mine); err != nil {
		return mine, false, err
	}
	for _, d := range diffs {
		logger.Warn("throttle changed at start-up", slog.String("variable", d.variable),
			slog.String("was", d.theirs), slog.String("now", d.mine))
	}
	if theirs != nil && theirs.BackendIdentity != mine.BackendIdentity && mine.Backend != "memory" {
		logger.Warn("throttle backend changed at start-up: its state is rebuilt from the send record",
			slog.String("backend", mine.Backend), slog.String("was", theirs.BackendIdentity),
			slog.String("now", mine.BackendIdentity), slog.String("redis_target_was", theirs.RedisTarget),
			slog.String("redis_target", mine.RedisTarget))
	}
	return mine, moved || theirs == nil, nil
}
