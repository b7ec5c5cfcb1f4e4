package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"time"
)

// report is what a run prints, as text or (with -json) as this JSON.
type report struct {
	Requests       int             `json:"requests"`
	DurationSec    float64         `json:"duration_seconds"`
	RequestsPerSec float64         `json:"requests_per_second"`
	SendsPerSec    float64         `json:"sends_per_second"`
	Latency        latencyReport   `json:"latency_ms"`
	HTTPStatus     map[string]int  `json:"http_status"`
	SendStatus     map[string]int  `json:"send_status"`
	FirstError     string          `json:"first_error,omitempty"`
	Sink           *sinkReport     `json:"sink,omitempty"`
	Server         *serverReport   `json:"server,omitempty"`
	HotStatus      map[string]int  `json:"hot_status,omitempty"` // -hot-every's sends
	Webhooks       *webhooksReport `json:"webhooks,omitempty"`
	Violations     []string        `json:"violations"`
}

// latencyReport is in milliseconds.
type latencyReport struct {
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// sinkReport is the outside view of the throttle.
type sinkReport struct {
	Received   int `json:"received"`
	MaxIn60s   int `json:"max_in_60s"`
	MaxIn3600s int `json:"max_in_3600s"`
	// Duplicates counts arrivals of a Message-ID seen before.
	Duplicates int `json:"duplicates"`
	// For a run of scheduled messages (-schedule-in): the lateness of
	// the arrivals after their scheduled second, and how many arrived
	// per second from that second to the last arrival.
	Lateness    *latencyReport `json:"lateness_ms,omitempty"`
	DispatchPer float64        `json:"dispatch_per_second,omitempty"`
}

// held fills in the figures of a scheduled run: arrivals (sorted) were
// all scheduled for at; n were accepted.
func (s *sinkReport) held(arrivals []time.Time, at time.Time, n int) {
	late := make([]time.Duration, len(arrivals))
	for i, a := range arrivals {
		late[i] = a.Sub(at)
	}
	s.Lateness = &latencyReport{P50: ms(percentile(late, 50)), P95: ms(percentile(late, 95)),
		P99: ms(percentile(late, 99)), Max: ms(percentile(late, 100))}
	if len(arrivals) > 0 && n > 0 {
		if span := arrivals[len(arrivals)-1].Sub(at).Seconds(); span > 0 {
			s.DispatchPer = float64(len(arrivals)) / span
		}
	}
}

// serverReport describes a spawned server.
type serverReport struct {
	DB        string `json:"db"`
	Provider  string `json:"provider"`
	PerMinute int    `json:"per_minute"`
	PerHour   int    `json:"per_hour"`
	ExitCode  int    `json:"exit_code"`
	LogLines  int    `json:"log_lines"`
	// CPUSec is the CPU time (user and system) the server used in all,
	// start-up and shutdown included.
	CPUSec float64 `json:"cpu_seconds"`
}

// buildReport summarises a run. arrivals are the sink's sorted arrival
// times, nil without a sink. A limit above 0 that the arrivals exceed in
// some window is a violation: the throttle broke its promise.
func buildReport(r loadResult, arrivals []time.Time, withSink bool, perMinute, perHour int) report {
	rep := report{
		Requests:    len(r.latencies),
		DurationSec: r.elapsed.Seconds(),
		HTTPStatus:  make(map[string]int),
		SendStatus:  r.sendStatus,
		Violations:  []string{},
	}
	if s := r.elapsed.Seconds(); s > 0 {
		rep.RequestsPerSec = float64(rep.Requests) / s
		rep.SendsPerSec = float64(r.sendStatus["sent"]) / s
	}
	for code, n := range r.httpStatus {
		key := strconv.Itoa(code)
		if code == 0 {
			key = "error"
		}
		rep.HTTPStatus[key] = n
	}
	lat := slices.Clone(r.latencies)
	slices.Sort(lat)
	rep.Latency = latencyReport{P50: ms(percentile(lat, 50)), P95: ms(percentile(lat, 95)),
		P99: ms(percentile(lat, 99)), Max: ms(percentile(lat, 100))}
	if r.firstErr != nil {
		rep.FirstError = r.firstErr.Error()
	}
	if !withSink {
		return rep
	}
	rep.Sink = &sinkReport{Received: len(arrivals),
		MaxIn60s: maxInWindow(arrivals, time.Minute), MaxIn3600s: maxInWindow(arrivals, time.Hour)}
	if perMinute > 0 && rep.Sink.MaxIn60s > perMinute {
		rep.Violations = append(rep.Violations,
			fmt.Sprintf("overshoot: %d messages arrived within 60 s, per-minute limit is %d", rep.Sink.MaxIn60s, perMinute))
	}
	if perHour > 0 && rep.Sink.MaxIn3600s > perHour {
		rep.Violations = append(rep.Violations,
			fmt.Sprintf("overshoot: %d messages arrived within 3600 s, per-hour limit is %d", rep.Sink.MaxIn3600s, perHour))
	}
	return rep
}

// percentile returns the nearest-rank p-th percentile of sorted: the
// smallest value with at least p% of the values at or below it. It is 0 for
// no values; p=100 is the maximum.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// maxInWindow returns the largest number of sorted times that fall in one
// half-open interval [t, t+w): only intervals starting at a time in the
// list need checking, since sliding a window's start forward to its first
// member loses nothing.
func maxInWindow(sorted []time.Time, w time.Duration) int {
	best, lo := 0, 0
	for hi, t := range sorted {
		for t.Sub(sorted[lo]) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// write prints rep as indented JSON or as text.
func (rep report) write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	p("requests       %d in %.2f s\n", rep.Requests, rep.DurationSec)
	p("requests/s     %.1f\n", rep.RequestsPerSec)
	p("sends/s        %.1f (201 with status sent)\n", rep.SendsPerSec)
	p("latency ms     p50 %.2f  p95 %.2f  p99 %.2f  max %.2f\n",
		rep.Latency.P50, rep.Latency.P95, rep.Latency.P99, rep.Latency.Max)
	p("http status    %s\n", counts(rep.HTTPStatus))
	p("send status    %s\n", counts(rep.SendStatus))
	if rep.FirstError != "" {
		p("first error    %s\n", rep.FirstError)
	}
	if s := rep.Sink; s != nil {
		p("sink received  %d\n", s.Received)
		p("sink max/60s   %d\n", s.MaxIn60s)
		p("sink max/3600s %d\n", s.MaxIn3600s)
		p("sink dups      %d\n", s.Duplicates)
		if l := s.Lateness; l != nil {
			p("lateness ms    p50 %.2f  p95 %.2f  p99 %.2f  max %.2f (arrival after scheduled_at)\n", l.P50, l.P95, l.P99, l.Max)
			p("dispatch/s     %.1f (arrivals per second from scheduled_at to the last)\n", s.DispatchPer)
		}
	}
	if s := rep.Server; s != nil {
		p("server         db %s, provider %s, per-minute %d, per-hour %d, exit code %d, %d log lines, %.2f s of CPU\n",
			s.DB, s.Provider, s.PerMinute, s.PerHour, s.ExitCode, s.LogLines, s.CPUSec)
	}
	if rep.Webhooks != nil {
		rep.Webhooks.write(w)
	}
	for _, v := range rep.Violations {
		p("VIOLATION      %s\n", v)
	}
	return nil
}

// counts formats a count map in key order: "201=20 429=40".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := ""
	for i, k := range keys {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%s=%d", k, m[k])
	}
	return out
}
