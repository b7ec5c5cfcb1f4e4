package skuld

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
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
// full again.
//
// The summaries are written by a timer it owns, armed by the first refusal
// of a run and re-armed by each summary: on time, not when the next
// refusal or send happens to come (a summary once came 9 minutes late).
// Time, timer included, is the Sender's Clock, so tests advance it without
// sleeping. stop writes the last summary and stops the timer. It is safe
// for concurrent use.
type refusalLog struct {
	logger   *slog.Logger
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	running bool                       // a run of refusals is under way
	since   time.Duration              // Mono at the start of the current interval
	total   int                        // refusals since, not yet logged
	full    [len(throttle.Windows)]int // of which each window (throttle.Windows) was full
	retry   int                        // the last refusal's Retry-After
	timer   clock.Timer                // the next summary's, while a run is under way
	stopped bool                       // by stop: no more timers
	// pending counts the summary calls scheduled or running, so that stop
	// returns only once none can write any more.
	pending sync.WaitGroup
}

// refused records one refusal and logs it in full if it starts a run.
func (r *refusalLog) refused(ctx context.Context, e *throttle.RateLimitedError) {
	now := r.clock.Mono()
	r.mu.Lock()
	if !r.running {
		if !r.stopped { // after stop, every refusal is news: nothing sums up
			r.running, r.since = true, now
			r.armLocked()
		}
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

// armLocked schedules the next summary, an interval from now.
func (r *refusalLog) armLocked() {
	r.pending.Add(1)
	r.timer = r.clock.AfterFunc(r.interval, r.due)
}

// due is the timer's call: the summary of the interval that ended, or the
// end of the run if it was quiet.
func (r *refusalLog) due() {
	defer r.pending.Done()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || !r.running {
		return
	}
	r.flushLocked(r.clock.Mono(), false)
	if r.running {
		r.armLocked()
	}
}

// stop logs what has not been logged yet, whatever the interval (the last
// summary, at shutdown), stops the timer and returns once no summary can
// be written any more. Safe to call twice: the second logs nothing.
func (r *refusalLog) stop() {
	r.mu.Lock()
	if r.timer != nil && r.timer.Stop() {
		r.pending.Done() // its call will never run
	}
	r.timer = nil
	r.flushLocked(r.clock.Mono(), true)
	r.stopped = true
	r.mu.Unlock()
	r.pending.Wait()
}

func (r *refusalLog) flushLocked(now time.Duration, final bool) {
	if !r.running {
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
	// Not a request's ctx: a summary is of many requests.
	attrs := []any{slog.Int("refused", r.total)}
	for i, w := range throttle.Windows {
		// The second and the day, newer, only when they refused: a
		// server configured as before logs as before.
		if r.full[i] > 0 || w.Span == throttle.Minute || w.Span == throttle.Hour {
			attrs = append(attrs, slog.Int(strings.ReplaceAll(w.String(), "-", "_")+"_full", r.full[i]))
		}
	}
	attrs = append(attrs, slog.Int64("over_ms", (now-r.since).Milliseconds()), slog.Int("retry_after", r.retry))
	r.logger.WarnContext(context.Background(), msg, attrs...)
	r.since, r.total, r.full = now, 0, [len(throttle.Windows)]int{}
	if final {
		r.running = false
	}
}

// windowIndex is w's index in throttle.Windows.
func windowIndex(w throttle.Window) int { return slices.Index(throttle.Windows[:], w) }

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
