package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// WebhookSource counts the endpoints disabled (store.Store does).
type WebhookSource interface {
	DisabledWebhookEndpoints(ctx context.Context) (int64, error)
}

var (
	webhookOldest = prometheus.NewDesc(namespace+"_webhook_oldest_undelivered_seconds",
		"Age of the oldest event not yet delivered to every endpoint that wants it (0: none waiting).", nil, nil)
	webhookDisabled = prometheus.NewDesc(namespace+"_webhook_endpoints_disabled",
		"Webhook endpoints disabled, by their owner or by the server (a 410, 100 failures in a row, 5 days failing).", nil, nil)
)

// WatchWebhooks reports, at each scrape, the disabled endpoints and the
// age oldest gives of the oldest event not yet delivered.
func (m *Metrics) WatchWebhooks(src WebhookSource, oldest func(context.Context) (time.Duration, error)) {
	m.reg.MustRegister(&webhookCollector{src: src, oldest: oldest})
}

func newWebhookAttempts() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "webhook_attempts_total",
		Help: "Attempts to deliver an event to a webhook endpoint, by outcome (delivered, failed, snoozed, gone, " +
			"refused; disabled counts endpoints the server disabled)."}, []string{"outcome"})
}

// WebhookAttempt implements outbox.Observer.
func (m *Metrics) WebhookAttempt(outcome string) {
	m.webhookAttempts.WithLabelValues(outcome).Inc()
}

type webhookCollector struct {
	src    WebhookSource
	oldest func(context.Context) (time.Duration, error)
}

func (c *webhookCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- webhookOldest
	ch <- webhookDisabled
}

func (c *webhookCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	if age, err := c.oldest(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(webhookOldest, prometheus.GaugeValue, age.Seconds())
	}
	if n, err := c.src.DisabledWebhookEndpoints(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(webhookDisabled, prometheus.GaugeValue, float64(n))
	}
}
