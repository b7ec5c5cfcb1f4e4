package skuld

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// DefaultRefusalLogInterval is how often, during a run of refusals by the
// throttle, one summary line is logged.
const DefaultRefusalLogInterval = 10 * time.Second

// refusalLog keeps refusals by the throttle from flooding the log. Under a
// retry storm every request is a 429: a line each was 1.5 million lines in
// a 130 s load run. The first refusal of a run is logged at WARN with its
// details; the rest are counted, and one summary line with the exact counts
// per window is logged per interval while refusals go on, and a last one at
// shutdown. A quiet interval ends the run, so the next refusal is logged in
// full again. Time is the Sender's Clock, so tests drive it without
// sleeping. It is safe for concurrent use.
type refusalLog struct {
	logger   *slog.Logger
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	running bool          // a run of refusals is under way
	since   time.Duration // Mono at the start of the current interval
	total   int           // refusals since, not yet logged
	full    [4]int        // of which each window (throttle.Windows) was full
	retry   int           // the last refusal's Retry-After
}

// refused records one refusal and logs what is due.
func (r *refusalLog) refused(ctx context.Context, e *throttle.RateLimitedError) {
	now := r.clock.Mono()
	r.mu.Lock()
	r.flushLocked(now, false)
	if !r.running {
		r.running, r.since = true, now
		r.mu.Unlock()
		r.logger.WarnContext(ctx, "send refused by throttle",
			slog.String("windows", windowNames(e)),
			slog.String("counts", violationCounts(e)),
			slog.Int("retry_after", e.RetryAfterSeconds()),
			slog.Int64("summary_every_s", int64(r.interval/time.Second)))
		return
	}
	r.total++
	for _, v := range e.Violations {
		r.full[windowIndex(v.Window)]++
	}
	r.retry = e.RetryAfterSeconds()
	r.mu.Unlock()
}

// tick logs a summary that is due; the Sender calls it on admitted sends,
// so a run that ends is summed up without waiting for the next refusal.
func (r *refusalLog) tick() {
	now := r.clock.Mono()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		r.flushLocked(now, false)
	}
}

// flush logs what has not been logged yet, whatever the interval: the last
// summary, at shutdown.
func (r *refusalLog) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked(r.clock.Mono(), true)
}

func (r *refusalLog) flushLocked(now time.Duration, final bool) {
	if !r.running || (!final && now-r.since < r.interval) {
		return
	}
	if r.total == 0 {
		r.running = false // a quiet interval: the run is over
		return
	}
	msg := "sends refused by throttle since the last report"
	if final {
		msg = "sends refused by throttle before shutdown"
	}
	// Not ctx: a summary is of many requests, and must not carry the
	// request id of the one that happened to trigger it.
	attrs := []any{slog.Int("refused", r.total)}
	for i, w := range throttle.Windows {
		attrs = append(attrs, slog.Int(strings.ReplaceAll(w.String(), "-", "_")+"_full", r.full[i]))
	}
	attrs = append(attrs, slog.Int64("over_ms", (now-r.since).Milliseconds()), slog.Int("retry_after", r.retry))
	r.logger.WarnContext(context.Background(), msg, attrs...)
	r.since, r.total, r.full = now, 0, [4]int{}
	if final {
		r.running = false
	}
}

// windowIndex is w's index in throttle.Windows.
func windowIndex(w throttle.Window) int { return int(w.Scope)*2 + int(w.Span) }

func windowNames(e *throttle.RateLimitedError) string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = v.Window.String()
	}
	return strings.Join(parts, "; ")
}

func violationCounts(e *throttle.RateLimitedError) string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = fmt.Sprintf("%s %d/%d", v.Window, v.Count, v.Limit)
	}
	return strings.Join(parts, "; ")
}
