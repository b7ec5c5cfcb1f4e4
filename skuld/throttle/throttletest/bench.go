package throttletest

import (
	"slices"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// BenchLimits are limits no benchmark reaches: every iteration takes the
// admitted path.
var BenchLimits = throttle.Limits{PerMinute: 1 << 30, PerHour: 1 << 30}

// BenchReserveCommit measures Reserve+Commit of one send from an inbox
// through th, one goroutine at a time, both global windows and the inbox's
// on: ns/op, and the p50/p99 latency of the pair as extra metrics.
func BenchReserveCommit(b *testing.B, th throttle.Throttle) {
	lat := make([]time.Duration, 0, 1<<16)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		tk, err := th.Reserve(ctx, throttle.Request{Inbox: "bench-inbox", Lease: time.Minute})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		if len(lat) < cap(lat) {
			lat = append(lat, time.Since(start))
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if n := len(lat); n > 0 {
		b.ReportMetric(float64(lat[n/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[n*99/100].Nanoseconds()), "p99-ns")
	}
}
