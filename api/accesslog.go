package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/core/clock"
)

// tooManyLogInterval is how often, during a run of 429s, the access log
// writes one summary line instead of a line per refused request.
const tooManyLogInterval = 10 * time.Second

// maxLoggedField is the most of a request's method or path the access log
// writes: both are the client's to choose, up to the 1 MB header limit,
// and one line per request must not become a megabyte per request.
const maxLoggedField = 256

// clip is s cut to maxLoggedField bytes, marked as cut.
func clip(s string) string {
	if len(s) <= maxLoggedField {
		return s
	}
	return s[:maxLoggedField] + "...(cut)"
}

// accessLog logs one line per request after the error handler has run, so
// that the line has the final status. 429s are summarised (see tooMany):
// a retry storm against the throttle was 69,477 access lines in 15 s.
func (a *API) accessLog(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		if err := next(c); err != nil {
			c.Error(err)
		}
		req, status := c.Request(), c.Response().Status
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		now := a.Clock.Mono()
		attrs := []slog.Attr{slog.String("method", clip(req.Method)), slog.String("path", clip(req.URL.Path)),
			slog.Int("status", status), slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000)}
		if status == http.StatusTooManyRequests {
			if !a.tooMany.refused(now, methodLabel(req.Method)+" "+route) {
				return nil // counted; the summary will say it
			}
			attrs = append(attrs, slog.Int("similar_summarized_every_s", int(a.tooMany.interval/time.Second)))
		}
		level := slog.LevelInfo
		if route == "/health" || route == "/ready" {
			level = slog.LevelDebug
		}
		a.logger.LogAttrs(req.Context(), level, "request", attrs...)
		return nil
	}
}

// tooMany keeps 429s from flooding the access log, the way the send
// pipeline's refusal summary keeps the throttle's WARN lines down: the
// first 429 of a run is logged in full; the rest are counted by route, and
// while they go on one line per interval gives the exact counts; a quiet
// interval ends the run, so the next 429 is logged in full again. The
// summaries are written by a timer it owns, on the API's clock: on time,
// not by whichever request comes next (tests advance the clock instead of
// sleeping). stop, when the server drains, writes the last one and stops
// the timer. It is safe for concurrent use.
type tooMany struct {
	logger   *slog.Logger
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	running bool           // a run of 429s is under way
	since   time.Duration  // Mono at the start of the current interval
	total   int            // 429s since, not yet logged
	routes  map[string]int // of which, by "METHOD /route/:template"
	timer   clock.Timer    // the next summary's, while a run is under way
	stopped bool           // by stop: no more timers
	pending sync.WaitGroup // summary calls scheduled or running
}

func newTooMany(logger *slog.Logger, c clock.Clock, interval time.Duration) *tooMany {
	return &tooMany{logger: logger, clock: c, interval: interval, routes: map[string]int{}}
}

// refused records a 429 at now and reports whether it is the first of a
// run, to be logged in full; otherwise it is counted.
func (t *tooMany) refused(now time.Duration, route string) (logIt bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.running {
		if !t.stopped { // after stop, every 429 is logged in full
			t.running, t.since = true, now
			t.armLocked()
		}
		return true
	}
	t.total++
	t.routes[route]++
	return false
}

// armLocked schedules the next summary, an interval from now.
func (t *tooMany) armLocked() {
	t.pending.Add(1)
	t.timer = t.clock.AfterFunc(t.interval, t.due)
}

// due is the timer's call: the summary of the interval that ended, or the
// end of a quiet run.
func (t *tooMany) due() {
	defer t.pending.Done()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped || !t.running {
		return
	}
	t.flushLocked(t.clock.Mono(), false)
	if t.running {
		t.armLocked()
	}
}

// stop writes what has not been written, whatever the interval, stops the
// timer and returns once no summary can be written any more. Safe to call
// twice.
func (t *tooMany) stop() {
	t.mu.Lock()
	if t.timer != nil && t.timer.Stop() {
		t.pending.Done() // its call will never run
	}
	t.timer = nil
	t.flushLocked(t.clock.Mono(), true)
	t.stopped = true
	t.mu.Unlock()
	t.pending.Wait()
}

func (t *tooMany) flushLocked(now time.Duration, final bool) {
	if !t.running {
		return
	}
	if t.total == 0 {
		t.running = false // a quiet interval: the run is over
		return
	}
	// Not a request's context: the line is about many requests.
	t.logger.LogAttrs(context.Background(), slog.LevelInfo, "requests answered 429 since the last report",
		slog.Int("status", http.StatusTooManyRequests), slog.Int("count", t.total),
		slog.Any("by_route", t.routes), slog.Int64("over_ms", (now-t.since).Milliseconds()))
	t.since, t.total, t.routes = now, 0, map[string]int{}
	if final {
		t.running = false
	}
}
