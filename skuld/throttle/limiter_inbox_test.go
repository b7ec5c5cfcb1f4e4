package throttle

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

func ptr(n int) *int { return &n }

func reserveInbox(t *testing.T, l *GlobalRateLimiter, now time.Duration, inbox string, o Override) (Reservation, []string) {
	t.Helper()
	r, err := l.Reserve(now, 0, inbox, o)
	if err == nil {
		return r, nil
	}
	var rl *RateLimitedError
	if !errors.As(err, &rl) {
		t.Fatalf("ReserveInbox: %v", err)
	}
	return r, names(rl.Windows())
}

// TestInboxWindowsAreTakenTogether: a send needs room in its inbox's
// windows and the global ones; refused by one, it holds nothing in any.
func TestInboxWindowsAreTakenTogether(t *testing.T) {
	l := newLimiter(3, 0)
	l.setInboxDefaults(2, 0)
	for range 2 {
		r, refused := reserveInbox(t, l, at(0), "a", Override{})
		if refused != nil {
			t.Fatalf("refused %v", refused)
		}
		r.Commit(at(0))
	}
	if _, refused := reserveInbox(t, l, at(sec(1)), "a", Override{}); fmt.Sprint(refused) != "[inbox-per-minute]" {
		t.Fatalf("A's third: refused %v, want [inbox-per-minute]", refused)
	}
	if g := l.state(at(sec(1))).PerMinute; g.Used != 2 || g.InFlight != 0 {
		t.Errorf("global after the inbox refusal = %+v, want used 2, nothing in flight", g)
	}
	r, refused := reserveInbox(t, l, at(sec(1)), "b", Override{})
	if refused != nil {
		t.Fatalf("B refused %v", refused)
	}
	r.Commit(at(sec(1)))
	if _, refused := reserveInbox(t, l, at(sec(2)), "c", Override{}); fmt.Sprint(refused) != "[per-minute]" {
		t.Fatalf("C at the global limit: refused %v, want [per-minute]", refused)
	}
	if c := l.inboxState(at(sec(2)), "c", Override{}).PerMinute; c.Used+c.InFlight != 0 || c.Limit != 2 {
		t.Errorf("C's window after the global refusal = %+v, want limit 2 and nothing taken", c)
	}
	// An override of 0 is unlimited for that inbox; the global limit stays.
	l2 := newLimiter(0, 0)
	l2.setInboxDefaults(1, 0)
	for i := range 5 {
		if _, refused := reserveInbox(t, l2, at(0), "vip", Override{PerMinute: ptr(0)}); refused != nil {
			t.Fatalf("send %d with an unlimited override refused %v", i, refused)
		}
	}
}

// TestBothInboxWindowsFull: the refusal names every full window and the
// binding one is the one that frees last.
func TestBothInboxWindowsFull(t *testing.T) {
	l := newLimiter(1, 0)
	l.setInboxDefaults(1, 1)
	r, _ := reserveInbox(t, l, at(0), "a", Override{})
	r.Commit(at(0))
	_, err := l.Reserve(at(sec(1)), 0, "a", Override{})
	var rl *RateLimitedError
	if !errors.As(err, &rl) || fmt.Sprint(names(rl.Windows())) != "[per-minute inbox-per-minute inbox-per-hour]" {
		t.Fatalf("got %v, want the three full windows", err)
	}
	if b := rl.Binding(); b.Window != InboxHour || b.RetryAfter != rl.RetryAfter {
		t.Errorf("binding = %+v, want inbox-per-hour with Retry-After %v", b, rl.RetryAfter)
	}
}

// TestIdleInboxWindowsAreDropped: the windows of an inbox idle for longer
// than the day window and its last bucket are dropped and come back empty; an inbox with a send in flight
// is never dropped.
func TestIdleInboxWindowsAreDropped(t *testing.T) {
	l := newLimiter(0, 0)
	l.setInboxDefaults(5, 100)
	r, _ := reserveInbox(t, l, at(0), "idle", Override{})
	r.Commit(at(0))
	busy, _ := reserveInbox(t, l, at(0), "busy", Override{}) // in flight for ever
	later := at(Longest + time.Minute)
	reserveInbox(t, l, later, "other", Override{}) // a send sweeps
	l.mu.Lock()
	_, idleKept := l.inboxes["idle"]
	_, busyKept := l.inboxes["busy"]
	l.mu.Unlock()
	if idleKept || !busyKept {
		t.Errorf("after a day idle: idle kept %v (want false), busy kept %v (want true)", idleKept, busyKept)
	}
	if st := l.inboxState(later, "idle", Override{}); st.PerMinute.Used != 0 || st.PerHour.Used != 0 || st.PerHour.Limit != 100 {
		t.Errorf("dropped inbox state = %+v, want empty with its limits", st)
	}
	busy.Release()
}

// BenchmarkLimiterInboxes10k reserves and commits round-robin over 10,000
// active inboxes, each with its own limits, and reports the memory the
// limiter holds per inbox.
func BenchmarkLimiterInboxes10k(b *testing.B) {
	const inboxes = 10000
	ids := make([]string, inboxes)
	for i := range ids {
		ids[i] = fmt.Sprintf("inbox-%05d", i)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newLimiter(neverFull, neverFull)
	l.setInboxDefaults(neverFull, neverFull)
	now := sysClock.Mono()
	for _, id := range ids {
		r, err := l.Reserve(now, time.Minute, id, Override{})
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	perInbox := float64(after.HeapAlloc-before.HeapAlloc) / inboxes
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		now := sysClock.Mono()
		r, err := l.Reserve(now, time.Minute, ids[i], Override{})
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
		if i++; i == inboxes {
			i = 0
		}
	}
	b.ReportMetric(perInbox, "B/inbox")
	runtime.KeepAlive(l)
}
