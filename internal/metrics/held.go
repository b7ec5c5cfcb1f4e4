package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nornweave/nornweave/store"
)

// HeldSource reports the held messages (store.Store does).
type HeldSource interface {
	HeldStats(ctx context.Context) (store.HeldStats, error)
}

var (
	heldMessages = prometheus.NewDesc(namespace+"_held_messages",
		"Messages held for later dispatch, by status (scheduled, queued); with a shared database, the cluster's.",
		[]string{"status"}, nil)
	oldestQueued = prometheus.NewDesc(namespace+"_queue_oldest_age_seconds",
		"How long the longest-waiting queued message has been due; 0 when none is queued.", nil, nil)
)

// WatchHeld reports the held messages of src at each scrape: the queue's
// depth by status and the age of its oldest message, with now the clock.
// Call it once.
func (m *Metrics) WatchHeld(src HeldSource, now func() time.Time) {
	m.reg.MustRegister(&heldCollector{src: src, now: now})
}

// Dispatched implements hold.Observer: the lateness of one held
// message sent, its send time less its scheduled time.
func (m *Metrics) Dispatched(lateness time.Duration) {
	m.lateness.Observe(max(lateness, 0).Seconds())
}

func newLateness() prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace,
		Name: "dispatch_lateness_seconds",
		Help: "Actual send time less due time of each scheduled message sent (queued time included when it " +
			"was throttled at its time).",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 3600}})
}

type heldCollector struct {
	src HeldSource
	now func() time.Time
}

func (c *heldCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- heldMessages
	ch <- oldestQueued
}

func (c *heldCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	st, err := c.src.HeldStats(ctx)
	if err != nil {
		return // the database cannot be read: no held gauges this scrape
	}
	for status, n := range st.Count {
		ch <- prometheus.MustNewConstMetric(heldMessages, prometheus.GaugeValue, float64(n), status)
	}
	age := 0.0
	if !st.OldestQueued.IsZero() {
		age = max(c.now().Sub(st.OldestQueued), 0).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestQueued, prometheus.GaugeValue, age)
}
