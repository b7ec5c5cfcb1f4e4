package hold

import (
	"math"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
)

// ScaledRetry is River's default retry schedule (attempt⁴ seconds, with
// its jitter) with each wait scaled by Base per second: Base 10 ms waits
// 10 ms, then 160 ms, where River waits 1 s, then 16 s. A test sets it
// (app.WithRetryBase) to see a job run again without waiting River's real
// backoff; it keeps River's shape, and reads it through River's own
// policy rather than a copy of its formula.
type ScaledRetry struct {
	Base time.Duration
}

// NextRetry implements river.ClientRetryPolicy.
func (p ScaledRetry) NextRetry(job *rivertype.JobRow) time.Time {
	var def river.DefaultClientRetryPolicy
	now := time.Now()
	wait := def.NextRetry(job).Sub(now)
	scaled := float64(wait) * p.Base.Seconds()
	if scaled >= math.MaxInt64 {
		return now.Add(math.MaxInt64)
	}
	return now.Add(max(time.Duration(scaled), 0))
}
