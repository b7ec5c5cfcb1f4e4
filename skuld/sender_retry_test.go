package skuld

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

func sendErr(msg string, set func(*providers.SendError)) error {
	e := providers.NewSendError(msg, nil)
	set(e)
	return e
}

var (
	temporaryErr = sendErr("smtp: message rejected: 451 try later", func(e *providers.SendError) { e.Code, e.Temporary = 451, true })
	permanentErr = sendErr("smtp: message rejected: 550 no such user", func(e *providers.SendError) { e.Code = 550 })
	unknownErr   = sendErr("smtp: no answer after the message was sent", func(e *providers.SendError) { e.Unknown = true })
)

// TestSendOutcomes covers the retry rules and what each outcome does to the
// throttle and the row: a temporary failure is retried, holding the slot;
// a permanent one is not retried and gives the slot back; one that may have
// delivered is never retried and counts (hole 8); a panicking provider is an
// unknown outcome with its reservation settled (hole 7).
func TestSendOutcomes(t *testing.T) {
	tests := []struct {
		name         string
		provider     *fakeProvider
		wantAttempts int
		wantStatus   string
		wantCounted  bool
		wantError    string
	}{
		{"temporary twice then sent", &fakeProvider{errs: []error{temporaryErr, temporaryErr}}, 3, store.StatusSent, true, ""},
		{"temporary every time", &fakeProvider{err: temporaryErr}, 4, store.StatusFailed, false, "451"},
		{"permanent", &fakeProvider{err: permanentErr}, 1, store.StatusFailed, false, "550"},
		{"unknown", &fakeProvider{err: unknownErr}, 1, store.StatusFailed, true, "delivery unknown"},
		{"temporary then unknown", &fakeProvider{errs: []error{temporaryErr, unknownErr}}, 2, store.StatusFailed, true, "delivery unknown"},
		{"panic", &fakeProvider{panics: true}, 1, store.StatusFailed, true, "delivery unknown"},
		{"deadline waiting for a connection", &fakeProvider{errs: []error{context.DeadlineExceeded}}, 2, store.StatusSent, true, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newMemStore()
			s, lim := newTestSender(t, st, tt.provider, 1, nil)
			m, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
			if err != nil {
				t.Fatalf("Send: %v", err)
			}
			if tt.provider.attempts != tt.wantAttempts {
				t.Errorf("attempts = %d, want %d", tt.provider.attempts, tt.wantAttempts)
			}
			out := st.outcomes[m.ID]
			if out.Status != tt.wantStatus || m.Status != tt.wantStatus {
				t.Errorf("status = %q (recorded %q), want %q", m.Status, out.Status, tt.wantStatus)
			}
			if tt.wantError != "" && (out.Error == nil || !strings.Contains(*out.Error, tt.wantError)) {
				t.Errorf("error = %v, want it to mention %q", out.Error, tt.wantError)
			}
			if (out.CountedAt != nil) != tt.wantCounted {
				t.Errorf("slot counted = %v, want %v", out.CountedAt != nil, tt.wantCounted)
			}
			w := globalMinute(lim)
			if w.InFlight != 0 {
				t.Errorf("in flight after the send = %d, want 0 (settled on every path)", w.InFlight)
			}
			if got := w.Used == 1; got != tt.wantCounted {
				t.Errorf("throttle used = %d, want counted %v", w.Used, tt.wantCounted)
			}
		})
	}
}

// TestRetryHonoursDeadlineAndRetryAfter: a provider asking for a wait past
// SEND_RETRY_DEADLINE is not retried; the send fails and the slot returns.
func TestRetryHonoursDeadlineAndRetryAfter(t *testing.T) {
	slow := sendErr("sendgrid: rate limited (429)", func(e *providers.SendError) {
		e.Code, e.Temporary, e.RetryAfter = 429, true, time.Minute
	})
	st, p := newMemStore(), &fakeProvider{errs: []error{slow}}
	clock := newFakeClock()
	lim := newLimiter(1)
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, clock), Clock: clock, RetryMax: 3,
		Budget: Budget{RetryDeadline: 30 * time.Second}, RetryBackoff: time.Millisecond})
	m, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if p.attempts != 1 || m.Status != store.StatusFailed {
		t.Errorf("attempts %d, status %q; want 1 and failed (Retry-After past the deadline)", p.attempts, m.Status)
	}
	if w := globalMinute(lim); w.Used+w.InFlight != 0 {
		t.Errorf("throttle %+v, want the slot given back", w)
	}
}

// TestBackoffGrowsWithJitterAndRespectsRetryAfter checks the wait between
// attempts: within [b/2, b] for b doubling from RetryBackoff, capped, and
// never shorter than the provider's Retry-After.
func TestBackoffGrowsWithJitterAndRespectsRetryAfter(t *testing.T) {
	s := NewSender(Options{RetryBackoff: time.Second})
	for attempt, b := range map[int]time.Duration{1: time.Second, 2: 2 * time.Second, 3: 4 * time.Second, 9: maxBackoff} {
		for range 50 {
			if d := s.backoff(attempt, temporaryErr); d < b/2 || d > b {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, b/2, b)
			}
		}
	}
	hint := sendErr("x", func(e *providers.SendError) { e.Temporary, e.RetryAfter = true, 7*time.Second })
	if d := s.backoff(1, hint); d != 7*time.Second {
		t.Errorf("backoff with Retry-After 7s = %v, want 7s", d)
	}
}

// TestThrottleIgnoresWallClockSteps is hole 4: the limiter used wall time,
// so a step back made it drop every commit and a step forward emptied the
// windows.
func TestThrottleIgnoresWallClockSteps(t *testing.T) {
	for _, step := range []time.Duration{-2 * time.Minute, 2 * time.Minute, -48 * time.Hour} {
		t.Run(step.String(), func(t *testing.T) {
			clock := newFakeClock()
			st, p := newMemStore(), &fakeProvider{}
			lim := newLimiter(2)
			s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, clock), Clock: clock})
			send := func() error {
				_, err := s.Send(context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
				return err
			}
			if err := send(); err != nil {
				t.Fatal(err)
			}
			clock.Step(step)
			clock.Advance(time.Second)
			if err := send(); err != nil {
				t.Fatalf("second send after the step: %v", err)
			}
			clock.Advance(time.Second)
			var rl *throttle.RateLimitedError
			if err := send(); !errors.As(err, &rl) {
				t.Fatalf("third send within a minute, wall clock stepped %v: got %v, want refusal", step, err)
			}
			if len(p.sent) != 2 {
				t.Errorf("provider got %d, want 2", len(p.sent))
			}
		})
	}
}
