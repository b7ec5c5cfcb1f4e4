package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/store"
)

// limitVars are the variables `limits set` changes, with the field of the
// identity each is.
var limitVars = map[string]func(*store.ThrottleIdentity) *int{
	"GLOBAL_SEND_RATE_LIMIT_PER_SECOND": func(id *store.ThrottleIdentity) *int { return &id.GlobalPerSecond },
	"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE": func(id *store.ThrottleIdentity) *int { return &id.GlobalPerMinute },
	"GLOBAL_SEND_RATE_LIMIT_PER_HOUR":   func(id *store.ThrottleIdentity) *int { return &id.GlobalPerHour },
	"GLOBAL_SEND_RATE_LIMIT_PER_DAY":    func(id *store.ThrottleIdentity) *int { return &id.GlobalPerDay },
	"INBOX_SEND_RATE_LIMIT_PER_MINUTE":  func(id *store.ThrottleIdentity) *int { return &id.InboxPerMinute },
	"INBOX_SEND_RATE_LIMIT_PER_HOUR":    func(id *store.ThrottleIdentity) *int { return &id.InboxPerHour },
	"INBOX_SEND_RATE_LIMIT_PER_DAY":     func(id *store.ThrottleIdentity) *int { return &id.InboxPerDay },
}

// limits prints the throttle the servers on the database share, or with
// "set VARIABLE=N ...", changes their limits: the running servers pick the
// change up within seconds and log it. The servers' own configuration
// should then say the same, or the next server to start beside them is
// refused. "from-ses" is limitsFromSES, which opens no database.
func limits(ctx context.Context, cfg config.Config, args []string, stdout, stderr io.Writer, logger *slog.Logger) int {
	if len(args) > 0 && args[0] == "from-ses" {
		return limitsFromSES(ctx, cfg, args[1:], stdout, stderr, logger)
	}
	set := len(args) > 0 && args[0] == "set"
	if (len(args) > 0 && !set) || (set && len(args) == 1) {
		fmt.Fprintln(stderr, "nornweave limits: usage: nornweave limits [set VARIABLE=N ... | from-ses [--margin 0.9]]")
		return 2
	}
	st, err := app.OpenStore(ctx, cfg, logger)
	if err != nil {
		fmt.Fprintln(stderr, "nornweave limits:", err)
		return 1
	}
	defer st.Close()
	id, err := st.ThrottleIdentity(ctx)
	if errors.Is(err, store.ErrNotFound) {
		fmt.Fprintln(stderr, "nornweave limits: no server has run on this database yet: its limits are the configuration's")
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, "nornweave limits:", err)
		return 1
	}
	if set {
		if id, err = setLimits(ctx, st, *id, args[1:]); err != nil {
			fmt.Fprintln(stderr, "nornweave limits:", err)
			return 1
		}
	}
	printIdentity(stdout, id)
	return 0
}

// setLimits applies VARIABLE=N changes to id and records it.
func setLimits(ctx context.Context, st *store.Store, id store.ThrottleIdentity, changes []string) (*store.ThrottleIdentity, error) {
	for _, c := range changes {
		name, value, ok := strings.Cut(c, "=")
		field := limitVars[strings.ToUpper(name)]
		if !ok || field == nil {
			return nil, fmt.Errorf("%q: want VARIABLE=N with one of GLOBAL_SEND_RATE_LIMIT_PER_SECOND, "+
				"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE, GLOBAL_SEND_RATE_LIMIT_PER_HOUR, GLOBAL_SEND_RATE_LIMIT_PER_DAY, "+
				"INBOX_SEND_RATE_LIMIT_PER_MINUTE, INBOX_SEND_RATE_LIMIT_PER_HOUR, INBOX_SEND_RATE_LIMIT_PER_DAY", c)
		}
		n, err := strconv.Atoi(value)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s: want a whole number, 0 or more (0 is unlimited), got %q", name, value)
		}
		*field(&id) = n
	}
	who := "nornweave limits set"
	if u, err := user.Current(); err == nil {
		host, _ := os.Hostname()
		who += " by " + u.Username + "@" + host
	}
	id.ChangedAt, id.ChangedBy = time.Now(), who
	return st.SetThrottleIdentity(ctx, id)
}

func printIdentity(w io.Writer, id *store.ThrottleIdentity) {
	fmt.Fprintf(w, "THROTTLE_BACKEND=%s\n", id.Backend)
	if id.Backend == "redis" {
		fmt.Fprintf(w, "REDIS_URL=redis://%s (credentials not shown)\nREDIS_KEY_PREFIX=%s\n", id.RedisTarget, id.RedisPrefix)
	}
	fmt.Fprintf(w, "GLOBAL_SEND_RATE_LIMIT_PER_SECOND=%d\nGLOBAL_SEND_RATE_LIMIT_PER_MINUTE=%d\n", id.GlobalPerSecond, id.GlobalPerMinute)
	fmt.Fprintf(w, "GLOBAL_SEND_RATE_LIMIT_PER_HOUR=%d\nGLOBAL_SEND_RATE_LIMIT_PER_DAY=%d\n", id.GlobalPerHour, id.GlobalPerDay)
	fmt.Fprintf(w, "INBOX_SEND_RATE_LIMIT_PER_MINUTE=%d\nINBOX_SEND_RATE_LIMIT_PER_HOUR=%d\n", id.InboxPerMinute, id.InboxPerHour)
	fmt.Fprintf(w, "INBOX_SEND_RATE_LIMIT_PER_DAY=%d\n", id.InboxPerDay)
	if id.SendTimeoutMS > 0 {
		fmt.Fprintf(w, "SEND_TIMEOUT=%s\nSEND_RETRY_DEADLINE=%s\n", time.Duration(id.SendTimeoutMS)*time.Millisecond,
			time.Duration(id.SendRetryDeadlineMS)*time.Millisecond)
	}
	if id.ThrottleFail != "" {
		fmt.Fprintf(w, "THROTTLE_FAIL=%s\n", id.ThrottleFail)
	}
	fmt.Fprintf(w, "# version %d, recorded %s by %s\n", id.Version, id.ChangedAt.Format(time.RFC3339), id.ChangedBy)
}
