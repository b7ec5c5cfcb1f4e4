package throttle

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// at is the injected monotonic clock reading: the origin, on which bucket
// boundaries fall, plus an offset.
func at(offset time.Duration) time.Duration { return offset }

// sec turns fractional seconds into a Duration, for readable offsets.
func sec(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// send reserves and commits one send at now, failing the test on refusal.
func send(t *testing.T, l *GlobalRateLimiter, now time.Duration) {
	t.Helper()
	r, err := l.reserve(now, 0)
	if err != nil {
		t.Fatalf("Reserve(%v): got error %v, want admission", now, err)
	}
	r.Commit(now)
}

// probe reports the windows that refuse a send at now (nil if admitted); an
// admitted probe is released so it leaves no trace.
func probe(t *testing.T, l *GlobalRateLimiter, now time.Duration) []string {
	t.Helper()
	r, err := l.reserve(now, 0)
	if err == nil {
		r.Release()
		return nil
	}
	var rle *RateLimitedError
	if !errors.As(err, &rle) {
		t.Fatalf("Reserve: got error %T %v, want *RateLimitedError", err, err)
	}
	return names(rle.Windows())
}

func TestLimiterAdmission(t *testing.T) {
	minute, hour := []string{"per-minute"}, []string{"per-hour"}
	tests := []struct {
		name               string
		perMinute, perHour int
		sends              []time.Duration
		probeAt            time.Duration
		want               []string // refused windows; nil = admitted
	}{
		{"under the minute limit", 3, 0, []time.Duration{0, sec(1)}, sec(2), nil},
		{"at the minute limit", 3, 0, []time.Duration{0, sec(1), sec(2)}, sec(3), minute},
		{"under the hour limit", 0, 3, []time.Duration{0, 10 * time.Minute}, 20 * time.Minute, nil},
		{"at the hour limit", 0, 3, []time.Duration{0, 10 * time.Minute, 20 * time.Minute}, 30 * time.Minute, hour},
		{"minute full, hour not", 2, 100, []time.Duration{0, sec(1)}, sec(2), minute},
		{"hour full, minute not", 100, 2, []time.Duration{0, 5 * time.Minute}, 10 * time.Minute, hour},
		{"both full", 2, 2, []time.Duration{0, sec(1)}, sec(2), []string{"per-minute", "per-hour"}},
		{"minute unlimited", 0, 50, make([]time.Duration, 49), 0, nil},
		{"hour unlimited", 50, 0, make([]time.Duration, 49), 0, nil},
		{"both unlimited", 0, 0, make([]time.Duration, 1000), 0, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.perMinute, tt.perHour)
			for _, s := range tt.sends {
				send(t, l, at(s))
			}
			if got := probe(t, l, at(tt.probeAt)); !slices.Equal(got, tt.want) {
				t.Errorf("refused windows: got %v, want %v", got, tt.want)
			}
		})
	}
}

func TestLimiterExpiry(t *testing.T) {
	tests := []struct {
		name               string
		perMinute, perHour int
		sends              []time.Duration
		probeAt            time.Duration
		admitted           bool
	}{
		// A full minute at 0.0–0.9 s: bucket 0 counts until all of it is 60 s old.
		{"full minute, at 60 s", 10, 0, tenthsOfFirstSecond(), sec(60), false},
		{"full minute, at 60.5 s", 10, 0, tenthsOfFirstSecond(), sec(60.5), false},
		{"full minute, just before 61 s", 10, 0, tenthsOfFirstSecond(), sec(61) - 1, false},
		{"full minute, at 61 s", 10, 0, tenthsOfFirstSecond(), sec(61), true},
		{"full hour, at 3659 s", 0, 5, make([]time.Duration, 5), sec(3659), false},
		{"full hour, at 3660 s", 0, 5, make([]time.Duration, 5), sec(3660), true},
		{"hour burst at 59 s, at 3659 s", 0, 5, []time.Duration{sec(59), sec(59), sec(59), sec(59), sec(59)}, sec(3659), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.perMinute, tt.perHour)
			for _, s := range tt.sends {
				send(t, l, at(s))
			}
			if got := probe(t, l, at(tt.probeAt)) == nil; got != tt.admitted {
				t.Errorf("admitted at %v: got %v, want %v", tt.probeAt, got, tt.admitted)
			}
		})
	}
}

func tenthsOfFirstSecond() []time.Duration {
	var d []time.Duration
	for i := range 10 {
		d = append(d, time.Duration(i)*100*time.Millisecond)
	}
	return d
}

// TestLimiterPartialExpiry sends spread over several seconds and checks that
// room comes back one bucket at a time.
func TestLimiterPartialExpiry(t *testing.T) {
	l := newLimiter(3, 0)
	send(t, l, at(0))
	send(t, l, at(sec(10.5)))
	send(t, l, at(sec(20)))
	steps := []struct {
		at       time.Duration
		admitted bool
	}{
		{sec(60.9), false},
		{sec(61), true}, // the 0 s send left: committed below
		{sec(70.9), false},
		{sec(71), true}, // the 10.5 s send left: committed below
		{sec(80), false},
		{sec(81), true}, // the 20 s send left
	}
	for _, s := range steps {
		if got := probe(t, l, at(s.at)) == nil; got != s.admitted {
			t.Fatalf("admitted at %v: got %v, want %v", s.at, got, s.admitted)
		}
		if s.admitted {
			send(t, l, at(s.at))
		}
	}
}

func TestLimiterRetryAfter(t *testing.T) {
	tests := []struct {
		name               string
		perMinute, perHour int
		sends              []time.Duration
		inFlight           int // reservations left open at the probe time
		probeAt            time.Duration
		want               time.Duration
	}{
		{"full minute, right away", 2, 0, []time.Duration{0, 0}, 0, 0, 61 * time.Second},
		{"rounded up", 2, 0, []time.Duration{0, 0}, 0, sec(30.2), 31 * time.Second},
		{"at least one second", 2, 0, []time.Duration{0, 0}, 0, sec(60.9), time.Second},
		{"oldest bucket first", 2, 0, []time.Duration{sec(5), sec(40)}, 0, sec(50), 16 * time.Second},
		{"in flight only", 2, 0, nil, 2, sec(10.3), 61 * time.Second},
		{"committed then in flight", 3, 0, []time.Duration{0, sec(5)}, 1, sec(20), 41 * time.Second},
		{"two sends must leave", 2, 0, []time.Duration{0, sec(5), sec(9)}, 0, sec(10), 56 * time.Second},
		{"hour window", 0, 3, []time.Duration{0, 20 * time.Minute, 40 * time.Minute}, 0, 50 * time.Minute, 660 * time.Second},
		{"both full, the later wins", 2, 2, []time.Duration{0, 0}, 0, sec(10), 3650 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.perMinute, tt.perHour)
			// Over-full windows (more sends than the limit) come from Restore.
			for _, s := range tt.sends {
				l.Restore(at(s), "", 1)
			}
			for range tt.inFlight {
				if _, err := l.reserve(at(tt.probeAt), 0); err != nil {
					t.Fatalf("Reserve: got %v, want admission", err)
				}
			}
			_, err := l.reserve(at(tt.probeAt), 0)
			var rle *RateLimitedError
			if !errors.As(err, &rle) {
				t.Fatalf("Reserve: got %v, want *RateLimitedError", err)
			}
			if rle.RetryAfter != tt.want {
				t.Errorf("RetryAfter: got %v, want %v", rle.RetryAfter, tt.want)
			}
			if got, want := rle.RetryAfterSeconds(), int(tt.want/time.Second); got != want {
				t.Errorf("RetryAfterSeconds: got %d, want %d", got, want)
			}
		})
	}
}

// TestLimiterReservationLifecycle shows that a reservation holds its slot
// until it is settled, a Release gives it back, and only Commit counts.
func TestLimiterReservationLifecycle(t *testing.T) {
	l := newLimiter(2, 0)
	r1, err := l.reserve(at(0), 0)
	if err != nil {
		t.Fatalf("first Reserve: got %v, want admission", err)
	}
	r2, err := l.reserve(at(0), 0)
	if err != nil {
		t.Fatalf("second Reserve: got %v, want admission", err)
	}
	if got := probe(t, l, at(0)); got == nil {
		t.Fatal("third Reserve with two in flight: got admission, want refusal")
	}
	st := l.state(at(0)).PerMinute
	if st.Used != 0 || st.InFlight != 2 {
		t.Errorf("in flight: got used %d in flight %d, want 0 and 2", st.Used, st.InFlight)
	}

	r1.Release() // the provider failed
	r2.Commit(at(sec(1)))
	st = l.state(at(sec(1))).PerMinute
	if st.Used != 1 || st.InFlight != 0 || st.Remaining != 1 {
		t.Errorf("after Release and Commit: got %+v, want used 1, in flight 0, remaining 1", st)
	}
	send(t, l, at(sec(2))) // the released slot is usable again
	if got := probe(t, l, at(sec(2))); got == nil {
		t.Error("after two commits: got admission, want refusal")
	}
}

func TestLimiterAdmitAllocs(t *testing.T) {
	l := newLimiter(1<<40, 1<<40)
	now := at(0)
	n := testing.AllocsPerRun(1000, func() {
		now += time.Millisecond
		r, err := l.reserve(now, 0)
		if err != nil {
			t.Fatal(err)
		}
		r.Commit(now)
	})
	if n != 0 {
		t.Errorf("Reserve+Commit: got %v allocs, want 0", n)
	}
}

func TestLimiterSettleTwicePanics(t *testing.T) {
	l := newLimiter(5, 0)
	r, _ := l.reserve(at(0), 0)
	r.Release()
	func() {
		defer func() {
			if recover() == nil {
				t.Error("second Release: got no panic, want one")
			}
		}()
		r.Release()
	}()
	// The panic must not leave the mutex locked.
	send(t, l, at(0))
}

func TestLimiterRestore(t *testing.T) {
	l := newLimiter(2, 3)
	l.Restore(at(-2*time.Hour), "", 1)    // older than both windows
	l.Restore(at(-30*time.Minute), "", 1) // inside the hour only
	l.Restore(at(sec(-30)), "", 1)        // inside both
	l.Restore(at(-90*time.Minute), "", 1) // stale by then: ignored
	st := l.state(at(0))
	if st.PerMinute.Used != 1 || st.PerHour.Used != 2 {
		t.Errorf("after Restore: got minute used %d, hour used %d; want 1 and 2", st.PerMinute.Used, st.PerHour.Used)
	}
	send(t, l, at(0))
	if got, want := probe(t, l, at(0)), []string{"per-minute", "per-hour"}; !slices.Equal(got, want) {
		t.Errorf("refused windows: got %v, want %v", got, want)
	}
}

func TestLimiterState(t *testing.T) {
	l := newLimiter(5, 100)
	send(t, l, at(0))
	send(t, l, at(sec(10)))
	if _, err := l.reserve(at(sec(15)), 0); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		got  WindowState
		want WindowState
	}{
		{"minute", l.state(at(sec(20))).PerMinute, WindowState{Window: GlobalMinute, Limit: 5, Used: 2, InFlight: 1, Remaining: 2, ResetSeconds: 41}},
		{"hour", l.state(at(sec(20))).PerHour, WindowState{Window: GlobalHour, Limit: 100, Used: 2, InFlight: 1, Remaining: 97, ResetSeconds: 3640}},
		{"minute after the first left", l.state(at(sec(61))).PerMinute, WindowState{Window: GlobalMinute, Limit: 5, Used: 1, InFlight: 1, Remaining: 3, ResetSeconds: 10}},
		{"empty minute", l.state(at(sec(200))).PerMinute, WindowState{Window: GlobalMinute, Limit: 5, InFlight: 1, Remaining: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %+v, want %+v", tt.got, tt.want)
			}
		})
	}

	t.Run("full", func(t *testing.T) {
		l := newLimiter(2, 0)
		send(t, l, at(0))
		send(t, l, at(sec(30)))
		want := WindowState{Window: GlobalMinute, Limit: 2, Used: 2, ResetSeconds: 21}
		if got := l.state(at(sec(40))).PerMinute; got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
	t.Run("unlimited", func(t *testing.T) {
		l := newLimiter(0, 0)
		send(t, l, at(0))
		want := WindowState{Window: GlobalMinute, Used: 1, ResetSeconds: 61}
		if got := l.state(at(0)).PerMinute; got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})
}

func TestRateLimitedErrorText(t *testing.T) {
	tests := []struct {
		name      string
		perMinute int
		perHour   int
		want      string
	}{
		{"minute", 5, 100, "Rate limit exceeded: per-minute limit reached (5/5)"},
		{"hour", 100, 5, "Rate limit exceeded: per-hour limit reached (5/5)"},
		{"both", 5, 5, "Rate limit exceeded: per-minute limit reached (5/5); per-hour limit reached (5/5)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimiter(tt.perMinute, tt.perHour)
			for range 4 {
				send(t, l, at(0))
			}
			if _, err := l.reserve(at(0), 0); err != nil { // the fifth stays in flight
				t.Fatal(err)
			}
			_, err := l.reserve(at(0), 0)
			if err == nil {
				t.Fatal("got admission, want refusal")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("Error(): got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestNewGlobalRateLimiter(t *testing.T) {
	l := NewGlobalRateLimiter(Limits{PerMinute: 5}, Limits{PerHour: 7})
	if g, in := l.Limits(); g != (Limits{PerMinute: 5}) || in != (Limits{PerHour: 7}) {
		t.Errorf("Limits: got %+v, %+v; want {5 0}, {0 7}", g, in)
	}
	defer func() {
		if recover() == nil {
			t.Error("negative limit: got no panic, want one")
		}
	}()
	newLimiter(-1, 0)
}
