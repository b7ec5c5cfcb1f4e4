package throttle

import (
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLimiterConcurrentBurst is the bug reservations exist for: 1,000
// requests arriving at once against a limit of 50.
func TestLimiterConcurrentBurst(t *testing.T) {
	const limit, callers = 50, 1000
	l := newLimiter(limit, 0)
	now := at(sec(5))

	admitted, refused := reserveAll(t, l, now, callers)
	if len(admitted) != limit || refused != callers-limit {
		t.Fatalf("got %d admitted and %d refused, want %d and %d", len(admitted), refused, limit, callers-limit)
	}
	var wg sync.WaitGroup
	for _, r := range admitted {
		wg.Go(func() { r.Commit(now) })
	}
	wg.Wait()
	if st := l.state(now).PerMinute; st.Used != limit || st.InFlight != 0 {
		t.Errorf("after committing: got used %d in flight %d, want %d and 0", st.Used, st.InFlight, limit)
	}
	if admitted, _ := reserveAll(t, l, at(sec(59)), callers); len(admitted) != 0 {
		t.Errorf("second burst in the same minute: got %d admitted, want 0", len(admitted))
	}
}

// reserveAll starts n goroutines that Reserve at the same instant once they
// are all ready, and returns the admitted reservations and the refusals.
func reserveAll(t *testing.T, l *GlobalRateLimiter, now time.Duration, n int) ([]Reservation, int) {
	t.Helper()
	start := make(chan struct{})
	results := make(chan Reservation, n)
	var refused atomic.Int64
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			<-start
			r, err := l.reserve(now, 0)
			if err == nil {
				results <- r
				return
			}
			var rle *RateLimitedError
			if !errors.As(err, &rle) {
				t.Errorf("Reserve: got %T %v, want *RateLimitedError", err, err)
			}
			refused.Add(1)
		})
	}
	close(start)
	wg.Wait()
	close(results)
	var admitted []Reservation
	for r := range results {
		admitted = append(admitted, r)
	}
	return admitted, int(refused.Load())
}

// TestLimiterConcurrentCommitOrRelease has goroutines randomly commit or
// release (a failed send) within one minute; whatever the interleaving, no
// more than the limit may be committed, and the windows account for every
// send exactly.
func TestLimiterConcurrentCommitOrRelease(t *testing.T) {
	const limit, workers, attempts = 20, 64, 50
	l := newLimiter(limit, 0)
	var committed atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(1, uint64(w)))
			for i := range attempts {
				now := at(time.Duration(i) * time.Second)
				r, err := l.reserve(now, 0)
				if err != nil {
					continue
				}
				if st := l.state(now).PerMinute; st.Used+st.InFlight > limit {
					t.Errorf("used %d + in flight %d: got over the limit %d", st.Used, st.InFlight, limit)
				}
				if rng.IntN(3) == 0 {
					r.Release()
					continue
				}
				r.Commit(now)
				committed.Add(1)
			}
		})
	}
	wg.Wait()
	if got := committed.Load(); got > limit {
		t.Errorf("committed: got %d, want at most %d", got, limit)
	}
	if st := l.state(at(sec(attempts))).PerMinute; int64(st.Used) != committed.Load() || st.InFlight != 0 {
		t.Errorf("State: got used %d in flight %d, want %d and 0", st.Used, st.InFlight, committed.Load())
	}
}

// TestLimiterSlidingPromise replays a long random schedule and checks the
// promise itself on the result: no closed 60 s interval holds more than
// perMinute commits and no closed 3600 s interval more than perHour.
func TestLimiterSlidingPromise(t *testing.T) {
	const perMinute, perHour = 7, 40
	l := newLimiter(perMinute, perHour)
	rng := rand.New(rand.NewPCG(2, 3))
	var commits []time.Duration
	var now time.Duration
	for range 20000 {
		now += time.Duration(rng.Int64N(int64(4 * time.Second)))
		r, err := l.reserve(at(now), 0)
		if err != nil {
			continue
		}
		// Some sends take a while; a few fail.
		done := now + time.Duration(rng.Int64N(int64(3*time.Second)))
		if rng.IntN(5) == 0 {
			r.Release()
			continue
		}
		r.Commit(at(done))
		commits = append(commits, done)
	}
	slices.Sort(commits)
	for _, w := range []struct {
		span  time.Duration
		limit int
	}{{time.Minute, perMinute}, {time.Hour, perHour}} {
		for i, c := range commits {
			end, _ := slices.BinarySearch(commits, c+w.span+1)
			if n := end - i; n > w.limit {
				t.Fatalf("%v window from %v: got %d commits, want at most %d", w.span, c, n, w.limit)
			}
		}
	}
	if len(commits) < perHour*10 {
		t.Errorf("got only %d commits; the schedule should exercise the limits", len(commits))
	}
}
