package admin

import (
	"fmt"
	"testing"
	"time"
)

// buckets are n buckets step apart from start, their counts given in
// pairs of sent, failed; the rest zeros.
func buckets(start time.Time, step time.Duration, n int, counts ...int64) []Bucket {
	bs := make([]Bucket, n)
	for i := range bs {
		bs[i].Start = start.Add(time.Duration(i) * step)
		if 2*i+1 < len(counts) {
			bs[i].Sent, bs[i].Failed = counts[2*i], counts[2*i+1]
		}
	}
	return bs
}

// part is a bar's heights as the tests compare them.
type part struct{ sentY, sentH, failedY, failedH int }

func parts(c Chart) []part {
	ps := make([]part, len(c.Bars))
	for i, b := range c.Bars {
		ps[i] = part{b.SentY, b.SentH, b.FailedY, b.FailedH}
	}
	return ps
}

func TestChartScale(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name         string
		counts       []int64
		want         []part
		sent, failed int64
	}{
		{"largest total is full height", []int64{90, 10, 45, 0},
			[]part{{10, 90, 0, 10}, {55, 45, 55, 0}}, 135, 10},
		{"zeros and only failures", []int64{80, 20, 0, 0, 0, 50},
			[]part{{20, 80, 0, 20}, {100, 0, 100, 0}, {100, 0, 50, 50}}, 80, 70},
		{"a non-zero part is at least 1 unit", []int64{1000, 0, 1, 0, 0, 1},
			[]part{{0, 100, 0, 0}, {99, 1, 99, 0}, {100, 0, 99, 1}}, 1001, 1},
		{"1 failure beside 999 sends still shows, within the height", []int64{999, 1},
			[]part{{1, 99, 0, 1}}, 999, 1},
		{"all zeros draw nothing", []int64{0, 0, 0, 0},
			[]part{{100, 0, 100, 0}, {100, 0, 100, 0}}, 0, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := chart("T", "t", minuteLayout, buckets(at, time.Minute, len(tt.counts)/2, tt.counts...))
			if got := parts(c); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("parts = %v, want %v", got, tt.want)
			}
			if c.Sent != tt.sent || c.Failed != tt.failed {
				t.Errorf("totals = %d sent, %d failed; want %d, %d", c.Sent, c.Failed, tt.sent, tt.failed)
			}
		})
	}
}

// An hour of minutes and a week of hours fill the width in whole units, a
// gap between bars; the labels are the first, middle and last buckets'
// times, in UTC whatever the buckets' zone.
func TestChartLayout(t *testing.T) {
	paris := time.FixedZone("CET", 3600)
	minutes := minutesChart(buckets(time.Date(2026, 11, 27, 10, 0, 0, 0, paris), time.Minute, 60, 12, 1))
	if minutes.Width != 720 || minutes.Bars[1].X != 12 || minutes.Bars[1].Width != 11 || minutes.ViewBox() != "0 0 720 120" {
		t.Errorf("minutes: width %d, bar 1 at %d of width %d, viewBox %q; want 720, 12, 11, \"0 0 720 120\"",
			minutes.Width, minutes.Bars[1].X, minutes.Bars[1].Width, minutes.ViewBox())
	}
	if got, want := fmt.Sprint(minutes.Labels), "[{0 09:00 start} {366 09:30 middle} {720 09:59 end}]"; got != want {
		t.Errorf("minutes labels = %s, want %s", got, want)
	}
	if b := minutes.Bars[0]; b.Title != "09:00 UTC: 12 sent, 1 failed" || b.Start.Location() != time.UTC {
		t.Errorf("first bar %q at %v, want \"09:00 UTC: 12 sent, 1 failed\" in UTC", b.Title, b.Start)
	}
	if got, want := minutes.Label(), "Sends per minute, last hour: 12 sent, 1 failed"; got != want {
		t.Errorf("label = %q, want %q", got, want)
	}
	hours := hoursChart(buckets(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), time.Hour, 168))
	if hours.Width != 672 || hours.Bars[167].X != 668 || hours.Bars[167].Width != 3 {
		t.Errorf("hours: width %d, last bar at %d of width %d; want 672, 668, 3", hours.Width, hours.Bars[167].X, hours.Bars[167].Width)
	}
	if got, want := fmt.Sprint(hours.Labels), "[{0 Nov 20 10:00 start} {338 Nov 23 22:00 middle} {672 Nov 27 09:00 end}]"; got != want {
		t.Errorf("hours labels = %s, want %s", got, want)
	}
	if empty := minutesChart(nil); empty.Width != 0 || len(empty.Bars) != 0 || len(empty.Labels) != 0 {
		t.Errorf("no buckets = %+v, want an empty chart", empty)
	}
}

// The thresholds warn over them, not at them: the rates are exact where
// the counts are.
func TestReputationRates(t *testing.T) {
	for _, tt := range []struct {
		r                 Reputation
		bounce, complaint string
		warnB, warnC      bool
	}{
		{Reputation{}, "0.00 %", "0.000 %", false, false},
		{Reputation{Sent: 100, Bounced: 5}, "5.00 %", "0.000 %", false, false},
		{Reputation{Sent: 10000, Bounced: 501, Complained: 10}, "5.01 %", "0.100 %", true, false},
		{Reputation{Sent: 1000, Complained: 1}, "0.00 %", "0.100 %", false, false},
		{Reputation{Sent: 100000, Complained: 101}, "0.00 %", "0.101 %", false, true},
		{Reputation{Bounced: 3, Complained: 1}, "0.00 %", "0.000 %", false, false},
	} {
		rows := rateRows(tt.r)
		if rows[0].Rate != tt.bounce || rows[0].Warn != tt.warnB || rows[1].Rate != tt.complaint || rows[1].Warn != tt.warnC {
			t.Errorf("%+v: %+v, want bounce %s (warn %t), complaint %s (warn %t)", tt.r, rows, tt.bounce, tt.warnB, tt.complaint, tt.warnC)
		}
		if rows[0].Threshold != "5 %" || rows[1].Threshold != "0.1 %" {
			t.Errorf("thresholds %q, %q; want 5 %%, 0.1 %%", rows[0].Threshold, rows[1].Threshold)
		}
	}
}
