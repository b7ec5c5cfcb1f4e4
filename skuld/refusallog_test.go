package skuld

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// A burst of 1,000 refusals is a handful of lines: the first in full, one
// summary per interval with exact counts, and the rest at shutdown.
func TestRefusalBurstIsSummarised(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	lim := throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 1, PerHour: 1}, throttle.Limits{PerMinute: 1})
	s := NewSender(Options{Store: newMemStore(), Provider: &fakeProvider{}, Throttle: throttle.NewMemory(lim, clock),
		Clock: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil)), RefusalLogInterval: 10 * time.Second})
	req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}
	ctx := context.Background()
	if _, err := s.Send(ctx, req); err != nil {
		t.Fatalf("first send: %v", err)
	}
	for i := range 1000 {
		if i > 0 {
			clock.Advance(25 * time.Millisecond) // 1,000 refusals over 25 s
		}
		var rl *throttle.RateLimitedError
		if _, err := s.Send(ctx, req); !errors.As(err, &rl) {
			t.Fatalf("send %d: err = %v, want a refusal", i, err)
		}
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}

	type line struct {
		Msg           string `json:"msg"`
		Level         string `json:"level"`
		Windows       string `json:"windows"`
		Refused       int    `json:"refused"`
		PerMinuteFull int    `json:"per_minute_full"`
		PerHourFull   int    `json:"per_hour_full"`
		InboxMinute   int    `json:"inbox_per_minute_full"`
		InboxHour     int    `json:"inbox_per_hour_full"`
	}
	var got []line
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var l line
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if strings.Contains(l.Msg, "refused by throttle") {
			got = append(got, l)
		}
	}
	// t = 0: the first in full; t = 10 s: refusals 2..400; t = 20 s:
	// 401..800; shutdown: 801..1000.
	want := []line{
		{Msg: "send refused by throttle", Level: "WARN", Windows: "per-minute; per-hour; inbox-per-minute"},
		{Msg: "sends refused by throttle since the last report", Level: "WARN", Refused: 399, PerMinuteFull: 399, PerHourFull: 399, InboxMinute: 399},
		{Msg: "sends refused by throttle since the last report", Level: "WARN", Refused: 400, PerMinuteFull: 400, PerHourFull: 400, InboxMinute: 400},
		{Msg: "sends refused by throttle before shutdown", Level: "WARN", Refused: 200, PerMinuteFull: 200, PerHourFull: 200, InboxMinute: 200},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d refusal lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	total := 1
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %+v, want %+v", i, got[i], want[i])
		}
		total += got[i].Refused
	}
	if total != 1000 {
		t.Errorf("refusals accounted for = %d, want 1000", total)
	}
}

// After a quiet interval the next refusal is news again and logged in full.
func TestRefusalAfterQuietIntervalIsLoggedInFull(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := &refusalLog{logger: slog.New(slog.NewJSONHandler(&buf, nil)), clock: clock, interval: time.Second}
	e := &throttle.RateLimitedError{RetryAfter: time.Second,
		Violations: []throttle.Violation{{Window: throttle.GlobalMinute, Count: 1, Limit: 1}}}
	r.refused(context.Background(), e)
	clock.Advance(2 * time.Second) // nothing counted: the run ends silently
	r.refused(context.Background(), e)
	r.stop()
	if n := strings.Count(buf.String(), `"msg":"send refused by throttle"`); n != 2 {
		t.Errorf("full refusal lines = %d, want 2:\n%s", n, buf.String())
	}
	if strings.Contains(buf.String(), "since the last report") {
		t.Errorf("a summary of nothing was logged:\n%s", buf.String())
	}
}

// The summary is written when its interval ends, by the timer, with no
// further refusal or send to trigger it (issue 25: it came 9 minutes late,
// with the next refusal); a quiet interval after it ends the run, and the
// timer with it.
func TestRefusalSummaryIsWrittenOnTime(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	lim := throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 1}, throttle.Limits{})
	s := NewSender(Options{Store: newMemStore(), Provider: &fakeProvider{}, Throttle: throttle.NewMemory(lim, clock),
		Clock: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil)), RefusalLogInterval: 10 * time.Second})
	req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}
	ctx := context.Background()
	if _, err := s.Send(ctx, req); err != nil {
		t.Fatalf("first send: %v", err)
	}
	for range 3 { // the first in full, two counted
		if _, err := s.Send(ctx, req); err == nil {
			t.Fatal("a send over the limit was admitted")
		}
	}
	summaries := func() int { return strings.Count(buf.String(), "since the last report") }
	clock.Advance(10*time.Second - time.Millisecond)
	if n := summaries(); n != 0 {
		t.Fatalf("a summary before its interval ended:\n%s", buf.String())
	}
	clock.Advance(time.Millisecond)
	if n := summaries(); n != 1 || !strings.Contains(buf.String(), `"refused":2,`) ||
		!strings.Contains(buf.String(), `"over_ms":10000`) {
		t.Fatalf("at the end of the interval, %d summaries, want 1 of 2 refusals over 10000 ms:\n%s", n, buf.String())
	}
	clock.Advance(10 * time.Second) // quiet: the run ends, nothing to say
	if n := summaries(); n != 1 {
		t.Errorf("a quiet interval wrote a summary:\n%s", buf.String())
	}
	if n := clock.Timers(); n != 0 {
		t.Errorf("%d timers still scheduled after the run ended, want 0", n)
	}
	if err := s.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "before shutdown") {
		t.Errorf("shutdown summed up refusals already reported:\n%s", buf.String())
	}
}

// Shutdown writes the last summary and stops the timer: nothing is
// scheduled after it, and a second Shutdown writes nothing.
func TestRefusalLogStopsWithTheSender(t *testing.T) {
	var buf bytes.Buffer
	clock := newFakeClock()
	r := &refusalLog{logger: slog.New(slog.NewJSONHandler(&buf, nil)), clock: clock, interval: 10 * time.Second}
	e := &throttle.RateLimitedError{RetryAfter: time.Second,
		Violations: []throttle.Violation{{Window: throttle.GlobalMinute, Count: 1, Limit: 1}}}
	for range 3 {
		r.refused(context.Background(), e)
	}
	r.stop()
	r.stop()
	if n := clock.Timers(); n != 0 {
		t.Errorf("%d timers scheduled after stop, want 0", n)
	}
	clock.Advance(time.Minute)
	if n := strings.Count(buf.String(), "before shutdown"); n != 1 || !strings.Contains(buf.String(), `"refused":2,`) ||
		strings.Contains(buf.String(), "since the last report") {
		t.Errorf("want one last summary of 2 refusals and no other:\n%s", buf.String())
	}
}

// recordingObserver counts what the pipeline reports.
type recordingObserver struct {
	NopObserver
	calls, finished map[string]int
	refused         int
}

func (o *recordingObserver) ProviderCall(p, outcome string, _ time.Duration) { o.calls[outcome]++ }
func (o *recordingObserver) SendFinished(p, outcome, _ string)               { o.finished[outcome]++ }
func (o *recordingObserver) Refused([]throttle.Window)                       { o.refused++ }

func TestObserverSeesOutcomesAndRefusals(t *testing.T) {
	o := &recordingObserver{calls: map[string]int{}, finished: map[string]int{}}
	p := &fakeProvider{errs: []error{errors.New("smtp: message rejected: 554 no")}}
	clock := newFakeClock()
	s := NewSender(Options{Store: newMemStore(), Provider: p, Throttle: throttle.NewMemory(newLimiter(1), clock),
		Clock: clock, Observer: o})
	req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}
	for range 3 { // failed (slot back), sent, refused
		s.Send(context.Background(), req)
	}
	if o.finished[OutcomeFailed] != 1 || o.finished[OutcomeSent] != 1 || o.calls[OutcomeSent] != 1 || o.refused != 1 {
		t.Errorf("observed finished %v calls %v refused %d, want one failed, one sent, one refused",
			o.finished, o.calls, o.refused)
	}
}

// A failed send's log line says what went wrong, not "provider refused"
// for every failure.
func TestFailureLoggedByCause(t *testing.T) {
	refused := providers.NewSendError("smtp: connect to mx:25: connection refused",
		&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
	rejected := providers.NewSendError("smtp: recipient rejected: 550 no such user", nil)
	rejected.Code = 550
	for _, tt := range []struct {
		err       error
		msg, attr string
	}{
		{refused, "provider send failed: connection refused", `"cause":"connection_refused"`},
		{rejected, "provider send failed: refused by the server", `"cause":"rejected"`},
	} {
		var buf bytes.Buffer
		clock := newFakeClock()
		s := NewSender(Options{Store: newMemStore(), Provider: &fakeProvider{err: tt.err}, RetryMax: 0,
			Throttle: throttle.NewMemory(newLimiter(0), clock), Clock: clock, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		if _, err := s.Send(context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), `"msg":"`+tt.msg+`"`) || !strings.Contains(buf.String(), tt.attr) {
			t.Errorf("log = %s, want %q with %s", buf.String(), tt.msg, tt.attr)
		}
	}
}
