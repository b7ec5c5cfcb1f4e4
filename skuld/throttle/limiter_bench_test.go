package throttle

import (
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/nornweave/nornweave/core/clock"
)

// neverFull is a limit no benchmark run can reach, so every iteration takes
// the admitted path, as rate.Limiter.Allow does with rate.Inf-like limits.
const neverFull = 1 << 50

// sysClock is the system clock the benchmarks read, as the server does.
var sysClock = clock.NewSystem()

// The limiter benchmarks read the clock once per iteration, like
// rate.Limiter.Allow, and use it for both Reserve and Commit.

func BenchmarkLimiterReserveCommit(b *testing.B) {
	l := newLimiter(neverFull, neverFull)
	b.ReportAllocs()
	for b.Loop() {
		now := sysClock.Mono()
		r, err := l.reserve(now, 0)
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
	}
}

// BenchmarkLimiterReserveNCommit is ReserveCommit for a send of 5 units
// (recipients, THROTTLE_UNIT=recipient): the weighted path's cost against
// the one-unit path above, in the same run.
func BenchmarkLimiterReserveNCommit(b *testing.B) {
	l := newLimiter(neverFull, neverFull)
	b.ReportAllocs()
	for b.Loop() {
		now := sysClock.Mono()
		r, err := l.ReserveN(now, 0, "", Override{}, 5)
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
	}
}

func BenchmarkLimiterReserveRelease(b *testing.B) {
	l := newLimiter(neverFull, neverFull)
	b.ReportAllocs()
	for b.Loop() {
		r, err := l.reserve(sysClock.Mono(), 0)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkLimiterReserveCommitParallel(b *testing.B) {
	l := newLimiter(neverFull, neverFull)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := sysClock.Mono()
			r, err := l.reserve(now, 0)
			if err != nil {
				b.Error(err)
				return
			}
			r.Commit(now)
		}
	})
}

// BenchmarkXTimeRateAllow is the baseline: x/time/rate's Allow with a rate
// and burst it never exhausts.
func BenchmarkXTimeRateAllow(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	b.ReportAllocs()
	for b.Loop() {
		if !l.Allow() {
			b.Fatal("Allow refused")
		}
	}
}

func BenchmarkXTimeRateAllowParallel(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !l.Allow() {
				b.Error("Allow refused")
				return
			}
		}
	})
}

// The FixedClock pair leaves out time.Now, which on a virtual machine can
// cost more than the limiters themselves, to compare only their own work.

func BenchmarkLimiterReserveCommitFixedClock(b *testing.B) {
	l := newLimiter(neverFull, neverFull)
	now := sysClock.Mono()
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		r, err := l.reserve(now, 0)
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
	}
}

func BenchmarkXTimeRateAllowNFixedClock(b *testing.B) {
	l := rate.NewLimiter(rate.Limit(1e12), 1<<30)
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		now = now.Add(time.Microsecond)
		if !l.AllowN(now, 1) {
			b.Fatal("AllowN refused")
		}
	}
}
