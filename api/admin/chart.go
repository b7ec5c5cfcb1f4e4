package admin

import (
	"fmt"
	"time"
)

// A chart's plot is chartHeight SVG user units high and about chartWidth
// wide: each bucket gets the same whole number of units, so that the
// geometry the tests check is exact.
const (
	chartWidth  = 720
	chartHeight = 100
)

// Chart is a []Bucket drawn as stacked bars, sent below failed, each part
// scaled to the largest total.
type Chart struct {
	Title        string // "Sends per minute, last hour"
	ID           string // the prefix of its element ids: "minutes"
	Width        int
	Height       int
	Sent, Failed int64
	Bars         []ChartBar
	// Labels are the first, middle and last buckets' times, under the bars.
	Labels []AxisLabel
}

// ChartBar is one bucket's bar: its numbers, and the x, y and height of
// its sent and failed parts (a height of 0: not drawn).
type ChartBar struct {
	Start            time.Time
	Sent, Failed     int64
	X, Width         int
	SentY, SentH     int
	FailedY, FailedH int
	Title            string // "09:14 UTC: 12 sent, 1 failed"
}

// AxisLabel is a time under the bars; Anchor is its text-anchor class:
// start, middle or end.
type AxisLabel struct {
	X            int
	Text, Anchor string
}

// labelsHeight is the room under the bars for the axis labels.
const labelsHeight = 20

// ViewBox is the SVG's viewBox: the bars, and the labels under them.
func (c Chart) ViewBox() string {
	return fmt.Sprintf("0 0 %d %d", c.Width, c.Height+labelsHeight)
}

// Label is the chart's accessible name: its title and totals.
func (c Chart) Label() string {
	return fmt.Sprintf("%s: %d sent, %d failed", c.Title, c.Sent, c.Failed)
}

// chart draws bs. layout formats a bucket's time in its title and labels
// ("15:04" for minutes), always in UTC. Each part's height is its share of
// the largest total, at least 1 unit when not zero so that one failure
// beside a thousand sends still shows; a chart of zeros draws no part.
func chart(title, id, layout string, bs []Bucket) Chart {
	c := Chart{Title: title, ID: id, Height: chartHeight}
	if len(bs) == 0 {
		return c
	}
	slot := max(2, chartWidth/len(bs))
	gap := 0
	if slot >= 4 {
		gap = 1
	}
	c.Width = slot * len(bs)
	var largest int64
	for _, b := range bs {
		largest = max(largest, b.Sent+b.Failed)
		c.Sent += b.Sent
		c.Failed += b.Failed
	}
	part := func(n int64) int {
		if n <= 0 {
			return 0
		}
		return int(max(1, min(chartHeight, n*chartHeight/largest)))
	}
	c.Bars = make([]ChartBar, len(bs))
	for i, b := range bs {
		sent := part(b.Sent)
		failed := min(part(b.Failed), chartHeight-sent)
		c.Bars[i] = ChartBar{Start: b.Start.UTC(), Sent: b.Sent, Failed: b.Failed,
			X: i * slot, Width: slot - gap,
			SentY: chartHeight - sent, SentH: sent,
			FailedY: chartHeight - sent - failed, FailedH: failed,
			Title: fmt.Sprintf("%s UTC: %d sent, %d failed", b.Start.UTC().Format(layout), b.Sent, b.Failed)}
	}
	// Each label is at its bar's left edge, centre or right edge.
	label := func(i, dx int, anchor string) AxisLabel {
		return AxisLabel{X: i*slot + dx, Text: bs[i].Start.UTC().Format(layout), Anchor: anchor}
	}
	c.Labels = []AxisLabel{label(0, 0, "start")}
	if len(bs) > 2 {
		c.Labels = append(c.Labels, label(len(bs)/2, slot/2, "middle"))
	}
	if len(bs) > 1 {
		c.Labels = append(c.Labels, label(len(bs)-1, slot, "end"))
	}
	return c
}

// Time layouts of the charts' buckets.
const (
	minuteLayout = "15:04"
	hourLayout   = "Jan 2 15:04"
)

// minutesChart and hoursChart are the overview's two charts.
func minutesChart(bs []Bucket) Chart {
	return chart("Sends per minute, last hour", "minutes", minuteLayout, bs)
}

func hoursChart(bs []Bucket) Chart {
	return chart("Sends per hour, last week", "hours", hourLayout, bs)
}
