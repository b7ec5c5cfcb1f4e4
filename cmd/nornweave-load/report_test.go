package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	t.Parallel()
	ms := func(vs ...int) []time.Duration {
		out := make([]time.Duration, len(vs))
		for i, v := range vs {
			out[i] = time.Duration(v) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one value", ms(7), 99, 7 * time.Millisecond},
		{"p50 of 1..100", ms(hundred...), 50, 50 * time.Millisecond},
		{"p95 of 1..100", ms(hundred...), 95, 95 * time.Millisecond},
		{"p99 of 1..100", ms(hundred...), 99, 99 * time.Millisecond},
		{"max of 1..100", ms(hundred...), 100, 100 * time.Millisecond},
		// Nearest rank: ceil(0.5*4)=2nd value, ceil(0.95*4)=4th.
		{"p50 of four", ms(10, 20, 30, 40), 50, 20 * time.Millisecond},
		{"p95 of four", ms(10, 20, 30, 40), 95, 40 * time.Millisecond},
		{"p0 is the minimum", ms(10, 20, 30, 40), 0, 10 * time.Millisecond},
		{"tail outlier", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 900), 95, 900 * time.Millisecond},
		{"tail outlier below p90", ms(1, 1, 1, 1, 1, 1, 1, 1, 1, 900), 90, time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(p%v) = %v, want %v", tt.p, got, tt.want)
			}
		})
	}
}

func TestMaxInWindow(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(secs ...float64) []time.Time {
		out := make([]time.Time, len(secs))
		for i, s := range secs {
			out[i] = t0.Add(time.Duration(s * float64(time.Second)))
		}
		return out
	}
	tests := []struct {
		name  string
		times []time.Time
		w     time.Duration
		want  int
	}{
		{"none", nil, time.Minute, 0},
		{"one", at(5), time.Minute, 1},
		{"all in one minute", at(0, 10, 59.9), time.Minute, 3},
		{"exactly 60 s apart are two windows", at(0, 60), time.Minute, 1},
		{"window straddling the minute mark", at(0, 50, 55, 100, 105, 200), time.Minute, 4},
		{"burst at the end of one minute and the start of the next", at(0, 59, 59, 59, 61, 61, 130), time.Minute, 5},
		{"hour window", at(0, 1000, 3599, 3600, 7000), time.Hour, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := maxInWindow(tt.times, tt.w); got != tt.want {
				t.Errorf("maxInWindow = %d, want %d", got, tt.want)
			}
		})
	}
}

func TestBuildReportViolations(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	arrivals := []time.Time{t0, t0.Add(time.Second), t0.Add(2 * time.Second)}
	res := loadResult{tally: newTally(), elapsed: 10 * time.Second}
	tests := []struct {
		name               string
		perMinute, perHour int
		want               int
	}{
		{"unlimited", 0, 0, 0},
		{"within limits", 3, 3, 0},
		{"per-minute exceeded", 2, 0, 1},
		{"both exceeded", 2, 2, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep := buildReport(res, arrivals, true, tt.perMinute, tt.perHour)
			if len(rep.Violations) != tt.want {
				t.Errorf("violations = %q, want %d", rep.Violations, tt.want)
			}
		})
	}
}
