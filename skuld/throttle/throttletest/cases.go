package throttletest

import (
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

func testWindows(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 3, PerHour: 4}, throttle.Limits{PerMinute: 1})
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, "a"))
	refused(t, th, "a", iMinute)
	commit(t, reserve(t, th, ""))
	refused(t, th, "", gMinute)
	b.Advance(62 * time.Second)
	commit(t, reserve(t, th, "b"))
	refused(t, th, "c", gHour)
}

func testRefusalTakesNothing(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 5}, throttle.Limits{PerMinute: 1})
	commit(t, reserve(t, th, "a"))
	for range 3 {
		refused(t, th, "a", iMinute)
	}
	st := state(t, th, "")
	if got := st.PerMinute.Used + st.PerMinute.InFlight; got != 1 {
		t.Fatalf("global count after 3 refusals = %d, want 1", got)
	}
	for range 4 {
		commit(t, reserve(t, th, ""))
	}
	refused(t, th, "", gMinute)
}

func testReleaseFrees(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1}, throttle.Limits{PerMinute: 1})
	tk := reserve(t, th, "a")
	refused(t, th, "", gMinute)
	release(t, tk)
	commit(t, reserve(t, th, "a"))
	if st := state(t, th, "a"); st.PerMinute.Used != 1 || st.PerMinute.InFlight != 0 {
		t.Fatalf("inbox state = %+v, want used 1, in flight 0", st.PerMinute)
	}
}

func testCommitCounts(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 3, PerHour: 10}, throttle.Limits{})
	commit(t, reserve(t, th, ""))
	held := reserve(t, th, "")
	st := state(t, th, "")
	want := throttle.WindowState{Window: gMinute, Limit: 3, Used: 1, InFlight: 1, Remaining: 1}
	got := st.PerMinute
	got.ResetSeconds = 0
	if got != want {
		t.Fatalf("per-minute state = %+v, want %+v", got, want)
	}
	if st.PerMinute.ResetSeconds < 59 || st.PerMinute.ResetSeconds > 62 {
		t.Fatalf("per-minute reset = %d s, want about 61", st.PerMinute.ResetSeconds)
	}
	snap, err := th.State(ctx, "a", throttle.Override{})
	if err != nil {
		t.Fatalf("State: %v", err)
	}
	if g := snap.Global.PerMinute; g.Used != 1 || g.InFlight != 1 || !snap.HasInbox ||
		snap.Inbox.PerMinute != (throttle.WindowState{Window: iMinute}) {
		t.Fatalf("State = %+v; want the global state above and an untouched inbox", snap)
	}
	commit(t, held)
	if st := state(t, th, ""); st.PerHour.Used != 2 || st.PerHour.InFlight != 0 || st.PerHour.Remaining != 8 {
		t.Fatalf("per-hour state = %+v, want used 2, remaining 8", st.PerHour)
	}
}

func testBucketEdges(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 2}, throttle.Limits{})
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, ""))
	b.Advance(59 * time.Second)
	refused(t, th, "", gMinute)
	b.Advance(2 * time.Second) // 61 s: the bucket of t=0 has left
	commit(t, reserve(t, th, ""))
	commit(t, reserve(t, th, ""))
	refused(t, th, "", gMinute)
}

func testRetryAfterInFlight(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1}, throttle.Limits{})
	held := reserve(t, th, "")
	rl := refused(t, th, "", gMinute)
	// It may commit as late as its lease (plus the backend's margin), and
	// then counts for a minute and a bucket.
	lo, hi := lease+time.Minute, lease+b.Margin+time.Minute+2*time.Second
	if rl.RetryAfter < lo || rl.RetryAfter > hi {
		t.Fatalf("RetryAfter = %v with a send in flight for %v, want in [%v, %v]", rl.RetryAfter, lease, lo, hi)
	}
	b.Advance(lease - time.Second)
	commit(t, held)
	b.Advance(rl.RetryAfter - lease + time.Second)
	commit(t, reserve(t, th, ""))
}

// testRoomAfter: the earliest room may appear, which held mail waits for,
// is 0 while giving back a send in flight would make room, and otherwise
// when the committed sends leave, exactly; never later than RetryAfter.
func testRoomAfter(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 2}, throttle.Limits{})
	first := reserve(t, th, "")
	held := reserve(t, th, "")
	if rl := refused(t, th, "", gMinute); rl.RoomAfter != 0 {
		t.Fatalf("RoomAfter = %v with two sends in flight, want 0 (either may fail and give its slot back)", rl.RoomAfter)
	}
	b.Advance(10 * time.Second)
	commit(t, first)
	if rl := refused(t, th, "", gMinute); rl.RoomAfter != 0 {
		t.Fatalf("RoomAfter = %v with one send committed and one in flight, want 0", rl.RoomAfter)
	}
	b.Advance(10 * time.Second)
	commit(t, held)
	b.Advance(10 * time.Second)
	// The first counted at 10 s leaves with its bucket, 60 to 61 s later:
	// 40 to 41 s from now.
	rl := refused(t, th, "", gMinute)
	if lo, hi := 40*time.Second-time.Second/2, 41*time.Second+time.Second/2; rl.RoomAfter < lo || rl.RoomAfter > hi {
		t.Fatalf("RoomAfter = %v with the oldest send committed 20 s ago, want in [%v, %v]", rl.RoomAfter, lo, hi)
	}
	if rl.RoomAfter > rl.RetryAfter {
		t.Fatalf("RoomAfter = %v after RetryAfter %v", rl.RoomAfter, rl.RetryAfter)
	}
	b.Advance(rl.RoomAfter - time.Second)
	refused(t, th, "", gMinute)
	b.Advance(2 * time.Second)
	commit(t, reserve(t, th, ""))
}

func testBinding(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 1}, throttle.Limits{PerHour: 1})
	commit(t, reserve(t, th, "a"))
	rl := refused(t, th, "a", gMinute, iHour)
	if got := rl.Binding().Window; got != iHour {
		t.Fatalf("binding window = %v, want %v (it frees last)", got, iHour)
	}
	if rl.RetryAfter < time.Hour {
		t.Fatalf("RetryAfter = %v, want the hour window's (≥ 1h)", rl.RetryAfter)
	}
}

// testTicketSnapshot checks what Commit and Release report of the windows
// (a send's rate-limit headers) against a read of the state after them:
// equal, but for a reset that may be a second later (it is counted from
// the admission) — also when the send leaves a window full, where the
// reset is a Retry-After.
func testTicketSnapshot(t *testing.T, b Backend) {
	// Commits far from every limit stay gathered (a shared backend): the
	// snapshot counts this server's own as they are, as a read does.
	th := b.New(Options{Global: throttle.Limits{PerMinute: 5, PerHour: 10}, Inbox: throttle.Limits{PerMinute: 3},
		SettleDelay: time.Hour})
	commit(t, reserve(t, th, "a"))
	commit(t, reserve(t, th, "b"))
	b.Advance(10 * time.Second)
	other := reserve(t, th, "b") // in flight throughout
	defer func() { _, _ = other.Release(ctx) }()

	check := func(name string, got throttle.Snapshot) {
		t.Helper()
		want, err := th.State(ctx, "a", throttle.Override{})
		if err != nil {
			t.Fatalf("State: %v", err)
		}
		if !got.HasInbox {
			t.Fatalf("%s: the snapshot has no inbox windows", name)
		}
		g, w := got.States(), want.States()
		for i := range w {
			reset := g[i].ResetSeconds - w[i].ResetSeconds
			g[i].ResetSeconds = w[i].ResetSeconds
			if g[i] != w[i] || reset < 0 || reset > 1 {
				t.Fatalf("%s: the ticket reports %+v (reset %+d s), a read gives %+v", name, g[i], reset, w[i])
			}
		}
	}
	check("committed", commit(t, reserve(t, th, "a")))
	check("released", release(t, reserve(t, th, "a")))
	// The inbox's third send leaves its minute window full: its reset is
	// a Retry-After.
	check("left full", commit(t, reserve(t, th, "a")))
}

// testLimitsChange: limits changed while running apply from the next
// admission; what is counted stays counted.
func testLimitsChange(t *testing.T, b Backend) {
	th := newThrottle(b, throttle.Limits{PerMinute: 5}, throttle.Limits{PerMinute: 5})
	set, ok := th.(interface {
		SetLimits(global, inbox throttle.Limits)
	})
	if !ok {
		t.Fatalf("%T has no SetLimits", th)
	}
	for range 3 {
		commit(t, reserve(t, th, "a"))
	}
	set.SetLimits(throttle.Limits{PerMinute: 10}, throttle.Limits{PerMinute: 2})
	rl := refused(t, th, "a", iMinute)
	if v := rl.Violations[0]; v.Count != 3 || v.Limit != 2 {
		t.Fatalf("violation %+v, want 3 counted against the new limit 2", v)
	}
	set.SetLimits(throttle.Limits{PerMinute: 3}, throttle.Limits{})
	refused(t, th, "b", gMinute)
	if st := state(t, th, ""); st.PerMinute.Limit != 3 {
		t.Fatalf("state limit %d, want 3", st.PerMinute.Limit)
	}
}
