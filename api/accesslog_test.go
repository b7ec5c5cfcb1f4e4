package api

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// syncBuffer is a bytes.Buffer safe for the logger and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// accessLine is what the test reads of an access log line.
type accessLine struct {
	Msg     string         `json:"msg"`
	Status  int            `json:"status"`
	Count   int            `json:"count"`
	ByRoute map[string]int `json:"by_route"`
	OverMS  int64          `json:"over_ms"`
}

func (s *syncBuffer) lines(t *testing.T) []accessLine {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []accessLine
	for _, raw := range strings.Split(strings.TrimSpace(s.b.String()), "\n") {
		var l accessLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if l.Msg != "panic" {
			out = append(out, l)
		}
	}
	return out
}

// A storm of 1,000 429s over 25 s is a handful of access lines: the first
// in full, one summary per 10 s with the exact counts by route, and the
// rest when the server drains. Other requests are logged as ever.
func TestAccessLogSummarisesTooManyRequests(t *testing.T) {
	var buf syncBuffer
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	refused := fakeSender(func() (*store.Message, error) {
		return nil, &throttle.RateLimitedError{RetryAfter: 12 * time.Second,
			Violations: []throttle.Violation{{Window: throttle.GlobalMinute, Count: 5, Limit: 5, RetryAfter: 12 * time.Second}}}
	})
	h := New(Options{Store: fakeStore{}, Sender: refused, Clock: clock, Throttle: memThrottle(5, 0),
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)), AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2, EmailDomain: "acme.test"})
	for i := range 1000 {
		if i > 0 {
			clock.Advance(25 * time.Millisecond)
		}
		if rec := serve(h, "POST", "/v1/messages", validSend); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("request %d = %d, want 429", i, rec.Code)
		}
		if i == 500 {
			serve(h, "GET", "/v1/inboxes/nope", "") // a 404 in the storm: its own line
		}
	}
	h.Drain()

	lines := buf.lines(t)
	if len(lines) != 5 {
		t.Fatalf("got %d lines, want 5 (first 429, a 404, 2 summaries, the last at drain): %+v", len(lines), lines)
	}
	if l := lines[0]; l.Msg != "request" || l.Status != 429 {
		t.Errorf("first line = %+v, want the first 429 in full", l)
	}
	counted := 1
	for _, l := range lines[1:] {
		switch l.Msg {
		case "request":
			if l.Status != http.StatusNotFound {
				t.Errorf("line %+v, want only the 404 logged in full", l)
			}
		case "requests answered 429 since the last report":
			if l.Status != 429 || l.Count != l.ByRoute["POST /v1/messages"] || l.Count == 0 {
				t.Errorf("summary %+v, want the count by route", l)
			}
			counted += l.Count
		default:
			t.Errorf("unexpected line %+v", l)
		}
	}
	if counted != 1000 {
		t.Errorf("the lines account for %d 429s, want exactly 1000", counted)
	}
	if s := lines[1]; s.Msg != "requests answered 429 since the last report" || s.OverMS != 10000 {
		t.Errorf("first summary %+v, want one after 10 s", s)
	}
}

// A quiet interval ends a run: the next 429 is logged in full again, as
// is the first 429 of another route.
func TestAccessLogRunEndsWhenQuiet(t *testing.T) {
	var buf syncBuffer
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	tm := newTooMany(slog.New(slog.NewJSONHandler(&buf, nil)), clock, 10*time.Second)
	if !tm.refused(clock.Mono(), "POST /v1/messages") {
		t.Fatal("the first 429 of a run was not to be logged")
	}
	if tm.refused(clock.Mono(), "POST /v1/messages") {
		t.Fatal("the second 429 of a run was to be logged in full")
	}
	clock.Advance(10 * time.Second) // the summary of the one counted
	clock.Advance(10 * time.Second) // nothing in 10 s: the run is over
	if !tm.refused(clock.Mono(), "GET /v1/inboxes") {
		t.Error("the first 429 after a quiet interval was not to be logged in full")
	}
	tm.stop()
	lines := buf.lines(t)
	if len(lines) != 1 || lines[0].Count != 1 || lines[0].ByRoute["POST /v1/messages"] != 1 {
		t.Errorf("lines %+v, want one summary of one 429", lines)
	}
}

// The summary is written when its 10 s are up, by the timer, with no
// further request to trigger it (issue 25: the throttle's summary came 9
// minutes late, with the next request); Drain stops the timer.
func TestAccessLogSummaryIsWrittenOnTime(t *testing.T) {
	var buf syncBuffer
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	refused := fakeSender(func() (*store.Message, error) {
		return nil, &throttle.RateLimitedError{RetryAfter: 12 * time.Second,
			Violations: []throttle.Violation{{Window: throttle.GlobalMinute, Count: 5, Limit: 5, RetryAfter: 12 * time.Second}}}
	})
	h := New(Options{Store: fakeStore{}, Sender: refused, Clock: clock, Throttle: memThrottle(5, 0),
		Logger: slog.New(slog.NewJSONHandler(&buf, nil)), AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2, EmailDomain: "acme.test"})
	for range 3 {
		if rec := serve(h, "POST", "/v1/messages", validSend); rec.Code != http.StatusTooManyRequests {
			t.Fatalf("status %d, want 429", rec.Code)
		}
	}
	clock.Advance(10 * time.Second)
	lines := buf.lines(t)
	if len(lines) != 2 || lines[1].Msg != "requests answered 429 since the last report" || lines[1].Count != 2 ||
		lines[1].OverMS != 10000 {
		t.Fatalf("10 s after the first 429, with no request since: lines %+v, want the first 429 and a summary of 2", lines)
	}
	h.Drain()
	if n := clock.Timers(); n != 0 {
		t.Errorf("%d timers scheduled after Drain, want 0", n)
	}
}
