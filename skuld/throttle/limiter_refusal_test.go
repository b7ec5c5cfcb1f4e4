package throttle

import (
	"errors"
	"testing"
	"time"
)

// TestRetryAfterWithSendInFlight is hole 5: with a send in flight, a client
// that waits exactly Retry-After and meets no competitor must be admitted,
// even if the send in flight commits at the latest moment it can.
func TestRetryAfterWithSendInFlight(t *testing.T) {
	const lease = 45 * time.Second
	l := newLimiter(1, 0)
	inFlight, err := l.reserve(at(0), lease)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.reserve(at(sec(1)), lease)
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("second Reserve: got %v, want refusal", err)
	}
	inFlight.Commit(at(lease)) // at the last moment it could
	retry := at(sec(1)) + rl.RetryAfter
	if _, err := l.reserve(retry, lease); err != nil {
		t.Fatalf("Reserve after Retry-After %v: got %v, want admission", rl.RetryAfter, err)
	}
	if max := lease + 61*time.Second; rl.RetryAfter > max {
		t.Errorf("Retry-After = %v, want at most %v (the lease plus the window)", rl.RetryAfter, max)
	}
}

// TestRefusalBindingWindow is hole 6 at the source: with both windows full
// the refusal's binding window is the one that frees last, the one whose
// wait is Retry-After.
func TestRefusalBindingWindow(t *testing.T) {
	l := newLimiter(1, 1)
	send(t, l, at(0))
	_, err := l.reserve(at(sec(1)), 0)
	var rl *RateLimitedError
	if !errors.As(err, &rl) || len(rl.Violations) != 2 {
		t.Fatalf("got %v, want both windows violated", err)
	}
	b := rl.Binding()
	if b.Window != GlobalHour || b.RetryAfter != rl.RetryAfter {
		t.Errorf("binding = %+v, want per-hour with RetryAfter %v", b, rl.RetryAfter)
	}
	if m := rl.Violations[0]; m.Window != GlobalMinute || m.RetryAfter >= rl.RetryAfter {
		t.Errorf("per-minute violation = %+v, want an earlier wait than %v", m, rl.RetryAfter)
	}
}

// TestRefusalWordsALoweredLimit: after a restart with a lower limit the
// count can exceed it; the message says so instead of "(5/2)".
func TestRefusalWordsALoweredLimit(t *testing.T) {
	l := newLimiter(2, 0)
	for range 5 {
		l.Restore(at(0), "", 1)
	}
	_, err := l.reserve(at(sec(1)), 0)
	want := "Rate limit exceeded: per-minute limit reached (2/2; 5 sends from before the limit was lowered still count)"
	if err == nil || err.Error() != want {
		t.Errorf("got %v, want %q", err, want)
	}
}
