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
// refuses to start, naming the variable and the value they use.

// joinWait is how long a server sharing a backend waits for another that
// is starting (holding the lock exclusively for a moment) before refusing.
const joinWait = 10 * time.Second

// identityOf is the identity cfg gives this server's throttle.
func identityOf(cfg config.Config) store.ThrottleIdentity {
	id := store.ThrottleIdentity{Backend: cfg.ThrottleBackend,
		GlobalPerMinute: cfg.SendRateLimitPerMinute, GlobalPerHour: cfg.SendRateLimitPerHour,
		InboxPerMinute: cfg.InboxSendRateLimitPerMinute, InboxPerHour: cfg.InboxSendRateLimitPerHour}
	if !cfg.SharedThrottle() {
		id.Backend = "memory"
	}
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

// differences lists where mine differs from theirs.
func differences(mine, theirs store.ThrottleIdentity) []disagreement {
	var out []disagreement
	add := func(variable string, a, b any) {
		if sa, sb := fmt.Sprint(a), fmt.Sprint(b); sa != sb {
			out = append(out, disagreement{variable, sa, sb})
		}
	}
	add("THROTTLE_BACKEND", mine.Backend, theirs.Backend)
	add("REDIS_URL", mine.RedisTarget, theirs.RedisTarget)
	add("REDIS_KEY_PREFIX", mine.RedisPrefix, theirs.RedisPrefix)
	add("GLOBAL_SEND_RATE_LIMIT_PER_MINUTE", mine.GlobalPerMinute, theirs.GlobalPerMinute)
	add("GLOBAL_SEND_RATE_LIMIT_PER_HOUR", mine.GlobalPerHour, theirs.GlobalPerHour)
	add("INBOX_SEND_RATE_LIMIT_PER_MINUTE", mine.InboxPerMinute, theirs.InboxPerMinute)
	add("INBOX_SEND_RATE_LIMIT_PER_HOUR", mine.InboxPerHour, theirs.InboxPerHour)
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

// joinDatabase takes this server's place on the database of st: the server
// lock, and the throttle identity. moved reports that the throttle's
// backend (or its Redis) is not the one recorded: the shared state must be
// rebuilt from the send record. alone reports that no other server held
// the lock when this one took it.
func joinDatabase(ctx context.Context, cfg config.Config, st *store.Store, logger *slog.Logger) (lock *store.ServerLock, moved, alone bool, err error) {
	mine := identityOf(cfg)
	lock, alone, err = st.LockAlone(ctx)
	if err != nil {
		return nil, false, false, err
	}
	if alone {
		moved, err = adopt(ctx, st, mine, logger)
		if err == nil && mine.Backend != "memory" {
			err = lock.Share(ctx)
		}
		if err != nil {
			lock.Release()
			return nil, false, false, err
		}
		return lock, moved, true, nil
	}
	theirs, err := st.ThrottleIdentity(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, false, false, err
	}
	if mine.Backend == "memory" || st.Driver() != store.DriverPostgres {
		return nil, false, false, anotherServer(theirs)
	}
	deadline := time.Now().Add(joinWait)
	for {
		lock, joined, err := st.JoinShared(ctx)
		if err != nil {
			return nil, false, false, err
		}
		if joined {
			// The identity is read under the lock: a server that was
			// starting has recorded its own by now.
			if theirs, err = st.ThrottleIdentity(ctx); err != nil {
				lock.Release()
				return nil, false, false, err
			}
			if diffs := differences(mine, *theirs); len(diffs) > 0 {
				lock.Release()
				return nil, false, false, mismatchError(diffs, theirs)
			}
			return lock, false, false, nil
		}
		if time.Now().After(deadline) {
			return nil, false, false, anotherServer(theirs)
		}
		select {
		case <-ctx.Done():
			return nil, false, false, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
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
// itself, logging what it changes; moved reports a change of backend or
// Redis, which leaves the shared state to be rebuilt.
func adopt(ctx context.Context, st *store.Store, mine store.ThrottleIdentity, logger *slog.Logger) (moved bool, err error) {
	theirs, err := st.ThrottleIdentity(ctx)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	var diffs []disagreement
	if theirs != nil {
		if diffs = differences(mine, *theirs); len(diffs) == 0 {
			return false, nil
		}
	}
	mine.ChangedAt, mine.ChangedBy = time.Now(), whoStarts()
	if _, err := st.SetThrottleIdentity(ctx, mine); err != nil {
		return false, err
	}
	for _, d := range diffs {
		logger.Warn("throttle changed at start-up", slog.String("variable", d.variable),
			slog.String("was", d.theirs), slog.String("now", d.mine))
		if !strings.Contains(d.variable, "RATE_LIMIT") {
			moved = true
		}
	}
	return moved || theirs == nil, nil
}
