package seslimits

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
	"github.com/nornweave/nornweave/providers"
)

// applied records Apply's calls.
type applied struct{ calls [][2]int }

func (a *applied) apply(perSecond, perDay int) { a.calls = append(a.calls, [2]int{perSecond, perDay}) }

// logLines decodes a JSON log, one record a line.
func logLines(t *testing.T, b *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	b.Reset()
	return lines
}

// sesAt returns an SES provider for the fake, signed for us-east-1.
func sesAt(t *testing.T, f *providertest.Fake) *providers.SES {
	t.Helper()
	p, err := providers.NewSES(context.Background(), providers.SESConfig{AccessKeyID: "AKIDTESTEXAMPLE",
		SecretAccessKey: "test-secret", Region: "us-east-1", Endpoint: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The Refresher against the SES fake, on a fake clock: the first read at
// Start, a change an hour later, a failed read, recovery, Stop.
func TestRefresher(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	clk := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var log bytes.Buffer
	var a applied
	r, err := New(Options{Reader: sesAt(t, f), Clock: clk, Apply: a.apply,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// step advances the clock by d and checks what the reads did.
	step := func(name string, d time.Duration, wantReads int, wantCalls [][2]int) []map[string]any {
		t.Helper()
		clk.Advance(d)
		if got := f.Count(); got != wantReads {
			t.Errorf("%s: %d reads of the quota, want %d", name, got, wantReads)
		}
		if !slices.Equal(a.calls, wantCalls) {
			t.Errorf("%s: Apply calls %v, want %v", name, a.calls, wantCalls)
		}
		return logLines(t, &log)
	}

	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := step("start", 0, 1, [][2]int{{12, 45000}})
	if len(lines) != 1 || lines[0]["msg"] != "ses limits applied" || lines[0]["per_second"] != 12.0 ||
		lines[0]["per_day"] != 45000.0 || lines[0]["ses_max_send_rate"] != 14.0 || lines[0]["margin"] != 0.9 {
		t.Errorf("start logged %v, want one line: ses limits applied, per_second 12, per_day 45000, with SES's numbers", lines)
	}
	if auth := f.Requests()[0].Header.Get("Authorization"); !strings.Contains(auth, "Credential=AKIDTESTEXAMPLE/") ||
		!strings.Contains(auth, "/us-east-1/ses/aws4_request") {
		t.Errorf("Authorization = %q, want the configured key and region", auth)
	}

	f.SetSESQuota(providertest.SESQuota{MaxSendRate: 20, Max24HourSend: 100000})
	step("59 minutes", 59*time.Minute, 1, [][2]int{{12, 45000}})
	lines = step("an hour", time.Minute, 2, [][2]int{{12, 45000}, {18, 90000}})
	want := map[string]any{"level": "INFO", "msg": "ses limits changed", "per_second_was": 12.0, "per_second": 18.0,
		"per_day_was": 45000.0, "per_day": 90000.0}
	if len(lines) != 1 || !hasAll(lines[0], want) {
		t.Errorf("the change logged %v, want one line with %v", lines, want)
	}

	lines = step("unchanged", time.Hour, 3, [][2]int{{12, 45000}, {18, 90000}})
	if len(lines) != 0 {
		t.Errorf("an unchanged quota logged %v, want nothing", lines)
	}

	f.Respond(f.Reject(403, "User is not authorized to perform ses:GetAccount", "X-Amzn-ErrorType", "AccessDeniedException"))
	lines = step("failed read", time.Hour, 4, [][2]int{{12, 45000}, {18, 90000}})
	want = map[string]any{"level": "WARN", "msg": "ses limits not refreshed; keeping the last", "per_second": 18.0, "per_day": 90000.0}
	if len(lines) != 1 || !hasAll(lines[0], want) || !strings.Contains(lines[0]["error"].(string), "AccessDeniedException") {
		t.Errorf("the failed read logged %v, want one line with %v and SES's error", lines, want)
	}

	// It keeps reading after a failure.
	f.Respond(nil)
	f.SetSESQuota(providertest.SESQuota{MaxSendRate: 20, Max24HourSend: -1})
	step("recovered", time.Hour, 5, [][2]int{{12, 45000}, {18, 90000}, {18, 0}})

	for i := range 2 {
		if err := r.Stop(context.Background()); err != nil {
			t.Fatalf("Stop #%d = %v", i+1, err)
		}
	}
	if n := clk.Timers(); n != 0 {
		t.Errorf("%d timers left after Stop, want 0", n)
	}
	step("after Stop", 3*time.Hour, 5, [][2]int{{12, 45000}, {18, 90000}, {18, 0}})
	if err := r.Start(context.Background()); err == nil {
		t.Error("Start after Stop = nil error, want one")
	}
}

// A first read that fails is Start's error: the server does not start on
// limits it could not read. Nothing is applied or scheduled.
func TestRefresherStartFails(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	f.Respond(f.Reject(429, "Too many requests", "X-Amzn-ErrorType", "TooManyRequestsException"))
	clk := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	var a applied
	r, err := New(Options{Reader: sesAt(t, f), Clock: clk, Apply: a.apply})
	if err != nil {
		t.Fatal(err)
	}
	err = r.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "TooManyRequestsException") {
		t.Errorf("Start = %v, want the read's error", err)
	}
	if len(a.calls) != 0 || clk.Timers() != 0 {
		t.Errorf("after a failed Start: Apply calls %v, %d timers; want none", a.calls, clk.Timers())
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Errorf("Stop = %v", err)
	}
}

// blockingReader answers the first read and blocks the others until their
// context ends.
type blockingReader struct {
	reads   int
	blocked chan struct{} // closed when a read blocks
}

func (b *blockingReader) Quota(ctx context.Context) (providers.SESQuota, error) {
	b.reads++
	if b.reads == 1 {
		return providers.SESQuota{MaxSendRate: 14, Max24HourSend: 50000}, nil
	}
	close(b.blocked)
	<-ctx.Done()
	return providers.SESQuota{}, ctx.Err()
}

// Stop cuts a read under way short and returns once it has ended, without
// a warning or an Apply from it.
func TestRefresherStopEndsAReadUnderWay(t *testing.T) {
	t.Parallel()
	clk := clocktest.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	reader := &blockingReader{blocked: make(chan struct{})}
	var log bytes.Buffer
	var a applied
	r, err := New(Options{Reader: reader, Clock: clk, Apply: a.apply, Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	advanced := make(chan struct{})
	go func() {
		defer close(advanced)
		clk.Advance(time.Hour) // runs the read, which blocks
	}()
	<-reader.blocked
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := r.Stop(ctx); err != nil {
		t.Fatalf("Stop with a read under way = %v, want nil", err)
	}
	<-advanced
	if !slices.Equal(a.calls, [][2]int{{12, 45000}}) {
		t.Errorf("Apply calls %v, want only Start's", a.calls)
	}
	if strings.Contains(log.String(), "WARN") {
		t.Errorf("a read Stop cut short logged a warning: %s", log.String())
	}
}

func TestRefresherStopBeforeStart(t *testing.T) {
	t.Parallel()
	r, err := New(Options{Reader: &blockingReader{}, Apply: func(int, int) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Stop(context.Background()); err != nil {
		t.Errorf("Stop before Start = %v", err)
	}
	if err := r.Start(context.Background()); err == nil {
		t.Error("Start after Stop = nil error, want one")
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	t.Parallel()
	reader, apply := &blockingReader{}, func(int, int) {}
	tests := []struct {
		name string
		o    Options
		want string
	}{
		{"margin above 1", Options{Reader: reader, Apply: apply, Margin: 1.5}, "Margin"},
		{"negative margin", Options{Reader: reader, Apply: apply, Margin: -0.1}, "Margin"},
		{"no reader", Options{Apply: apply}, "Reader"},
		{"no apply", Options{Reader: reader}, "Apply"},
		{"negative interval", Options{Reader: reader, Apply: apply, Interval: -time.Second}, "Interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.o); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// hasAll reports whether line has every key of want with its value.
func hasAll(line, want map[string]any) bool {
	for k, v := range want {
		if line[k] != v {
			return false
		}
	}
	return true
}
