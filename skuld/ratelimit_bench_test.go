package skuld

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/nornweave/nornweave/core/address"
)

// neverFull is a limit no benchmark run can reach, so every iteration takes
// the admitted path, as rate.Limiter.Allow does with rate.Inf-like limits.
const neverFull = 1 << 50

// clock is the system clock the benchmarks read, as the server does.
var clock = NewSystemClock()

// The limiter benchmarks read the clock once per iteration, like
// rate.Limiter.Allow, and use it for both Reserve and Commit.

func BenchmarkLimiterReserveCommit(b *testing.B) {
	l := NewGlobalRateLimiter(neverFull, neverFull)
	b.ReportAllocs()
	for b.Loop() {
		now := clock.Mono()
		r, err := l.Reserve(now, 0)
		if err != nil {
			b.Fatal(err)
		}
		r.Commit(now)
	}
}

func BenchmarkLimiterReserveRelease(b *testing.B) {
	l := NewGlobalRateLimiter(neverFull, neverFull)
	b.ReportAllocs()
	for b.Loop() {
		r, err := l.Reserve(clock.Mono(), 0)
		if err != nil {
			b.Fatal(err)
		}
		r.Release()
	}
}

func BenchmarkLimiterReserveCommitParallel(b *testing.B) {
	l := NewGlobalRateLimiter(neverFull, neverFull)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			now := clock.Mono()
			r, err := l.Reserve(now, 0)
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
	l := NewGlobalRateLimiter(neverFull, neverFull)
	now := clock.Mono()
	b.ReportAllocs()
	for b.Loop() {
		now += time.Microsecond
		r, err := l.Reserve(now, 0)
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

func BenchmarkDomainFilter10(b *testing.B)  { benchmarkDomainFilter(b, 10) }
func BenchmarkDomainFilter100(b *testing.B) { benchmarkDomainFilter(b, 100) }

// benchmarkDomainFilter checks a three-recipient message that passes n/2
// blocklist and n/2 allowlist patterns, the last allowlist pattern being the
// one that admits it.
func benchmarkDomainFilter(b *testing.B, n int) {
	var allow, block []string
	for i := range n / 2 {
		block = append(block, fmt.Sprintf(`(.*\.)?blocked%d\.example`, i))
		allow = append(allow, fmt.Sprintf(`(.*\.)?partner%d\.example`, i))
	}
	f, err := NewDomainFilter(strings.Join(allow, ","), strings.Join(block, ","))
	if err != nil {
		b.Fatal(err)
	}
	last := fmt.Sprintf("partner%d.example", n/2-1)
	to := address.MustParseList("ann@"+last, "bob@mail."+last)
	cc := address.MustParseList("Carol@" + strings.ToUpper(last))
	b.ReportAllocs()
	for b.Loop() {
		if rejected := f.Rejected(to, cc); rejected != nil {
			b.Fatalf("Rejected: got %v, want nil", rejected)
		}
	}
}
