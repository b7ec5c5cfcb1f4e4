package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/nornweave/nornweave/skuld/activity"
)

// ReputationSource counts what providers judge a sender by (store.Store
// does).
type ReputationSource interface {
	Reputation(ctx context.Context, since time.Time) (sent, hardBounces, complaints int64, err error)
}

// ReputationWindow is the span the bounce and complaint rates are taken
// over (activity.ReputationWindow: a day).
const ReputationWindow = activity.ReputationWindow

var (
	sent24h = prometheus.NewDesc(namespace+"_sent_24h",
		"Messages sent in the last 24 hours; with a shared database, the cluster's.", nil, nil)
	bounceRate = prometheus.NewDesc(namespace+"_bounce_rate_24h",
		"Hard bounces reported in the last 24 hours per message sent in them (SES reviews an account at 0.05).", nil, nil)
	complaintRate = prometheus.NewDesc(namespace+"_complaint_rate_24h",
		"Complaints reported in the last 24 hours per message sent in them (SES reviews an account at 0.001).", nil, nil)
)

// WatchReputation reports the bounce and complaint rates of src over the
// last ReputationWindow at each scrape, with now the clock. Call it once.
func (m *Metrics) WatchReputation(src ReputationSource, now func() time.Time) {
	m.reg.MustRegister(&reputationCollector{src: src, now: now})
}

type reputationCollector struct {
	src ReputationSource
	now func() time.Time
}

func (c *reputationCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- sent24h
	ch <- bounceRate
	ch <- complaintRate
}

func (c *reputationCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	sent, hard, complaints, err := c.src.Reputation(ctx, c.now().Add(-ReputationWindow))
	if err != nil {
		return // the database cannot be read: no rates this scrape
	}
	ch <- prometheus.MustNewConstMetric(sent24h, prometheus.GaugeValue, float64(sent))
	ch <- prometheus.MustNewConstMetric(bounceRate, prometheus.GaugeValue, Rate(hard, sent))
	ch <- prometheus.MustNewConstMetric(complaintRate, prometheus.GaugeValue, Rate(complaints, sent))
}

// Rate is n per sent, 0 when nothing was sent.
func Rate(n, sent int64) float64 {
	if sent == 0 {
		return 0
	}
	return float64(n) / float64(sent)
}
