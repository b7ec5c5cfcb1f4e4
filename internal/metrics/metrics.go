// Package metrics exposes the server's Prometheus metrics. It implements
// skuld.Observer for the send pipeline and api.Metrics for the HTTP layer,
// so that neither imports Prometheus, and reads the throttle's windows at
// scrape time. Every metric lives in the Registry of one Metrics: there is
// no global state, and two servers in one test process do not share counts.
//
// No label carries a secret, an address or an id: providers, outcomes,
// windows, route templates ("/v1/messages/:id", never the URL), methods and
// status codes only.
package metrics

import (
	"context"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/nornweave/nornweave/skuld"
)

const namespace = "nornweave"

// Limiter is the throttle whose windows are reported: skuld.Throttle, of
// whichever backend.
type Limiter interface {
	State(ctx context.Context) (skuld.State, error)
}

// stateTimeout bounds reading a shared backend's windows at a scrape.
const stateTimeout = 2 * time.Second

// Metrics holds every metric of one server. It is safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	sends           *prometheus.CounterVec
	providerSeconds *prometheus.HistogramVec
	retries         *prometheus.CounterVec
	refusals        *prometheus.CounterVec
	requests        *prometheus.CounterVec
	requestSeconds  *prometheus.HistogramVec
	replays         prometheus.Counter
}

// New registers every metric in a new registry: the server's own, the
// throttle windows read from limiter at each scrape on clock's monotonic
// time, build information, and the Go runtime and process collectors.
func New(version string, limiter Limiter, clock skuld.Clock) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.sends = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "sends_total",
		Help: "Sends admitted by the throttle, by provider and final outcome (sent, failed, unknown)."},
		[]string{"provider", "outcome"})
	m.providerSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "provider_request_duration_seconds", Help: "Time of one provider attempt, by provider and outcome.",
		Buckets: []float64{.01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}},
		[]string{"provider", "outcome"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "send_retries_total",
		Help: "Provider attempts retried after a temporary failure."}, []string{"provider"})
	m.refusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "throttle_refusals_total",
		Help: "Sends refused with 429, by full window (a refusal with both windows full counts in each)."},
		[]string{"window"})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "http_requests_total",
		Help: "HTTP requests by method, route template and status."}, []string{"method", "route", "status"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "http_request_duration_seconds", Help: "HTTP request duration by method and route template.",
		Buckets: prometheus.DefBuckets}, []string{"method", "route"})
	m.replays = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "idempotent_replays_total",
		Help: "Responses replayed for a repeated Idempotency-Key instead of sending again."})
	build := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}})
	build.Set(1)
	m.reg.MustRegister(m.sends, m.providerSeconds, m.retries, m.refusals, m.requests, m.requestSeconds,
		m.replays, build, &windowCollector{limiter: limiter, clock: clock},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Both windows appear from the first scrape, at zero.
	for _, w := range []string{"per-minute", "per-hour"} {
		m.refusals.WithLabelValues(w)
	}
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry every metric is in, for tests.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// ProviderCall implements skuld.Observer.
func (m *Metrics) ProviderCall(provider, outcome string, d time.Duration) {
	m.providerSeconds.WithLabelValues(provider, outcome).Observe(d.Seconds())
}

// SendFinished implements skuld.Observer.
func (m *Metrics) SendFinished(provider, outcome string) {
	m.sends.WithLabelValues(provider, outcome).Inc()
}

// Retried implements skuld.Observer.
func (m *Metrics) Retried(provider string) { m.retries.WithLabelValues(provider).Inc() }

// Refused implements skuld.Observer.
func (m *Metrics) Refused(windows []string) {
	for _, w := range windows {
		m.refusals.WithLabelValues(w).Inc()
	}
}

// Request implements api.Metrics: one HTTP request answered. route is the
// template the router matched.
func (m *Metrics) Request(method, route string, status int, d time.Duration) {
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.requestSeconds.WithLabelValues(method, route).Observe(d.Seconds())
}

// Replayed implements api.Metrics.
func (m *Metrics) Replayed() { m.replays.Inc() }

// windowCollector reports each throttle window's counts as they are at the
// scrape, so the gauges are never stale and cost nothing between scrapes.
type windowCollector struct {
	limiter Limiter
	clock   skuld.Clock
}

var (
	windowUsed = prometheus.NewDesc(namespace+"_throttle_window_used", "Committed sends inside the window.",
		[]string{"window"}, nil)
	windowInFlight = prometheus.NewDesc(namespace+"_throttle_window_in_flight",
		"Sends admitted and not yet answered by the provider.", []string{"window"}, nil)
	windowLimit = prometheus.NewDesc(namespace+"_throttle_window_limit", "The window's limit; 0 is unlimited.",
		[]string{"window"}, nil)
)

func (c *windowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- windowUsed
	ch <- windowInFlight
	ch <- windowLimit
}

func (c *windowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	st, err := c.limiter.State(ctx)
	if err != nil {
		return // a shared backend that cannot be read: no window gauges this scrape
	}
	for _, w := range []struct {
		name string
		s    skuld.WindowState
	}{{"per-minute", st.PerMinute}, {"per-hour", st.PerHour}} {
		ch <- prometheus.MustNewConstMetric(windowUsed, prometheus.GaugeValue, float64(w.s.Used), w.name)
		ch <- prometheus.MustNewConstMetric(windowInFlight, prometheus.GaugeValue, float64(w.s.InFlight), w.name)
		ch <- prometheus.MustNewConstMetric(windowLimit, prometheus.GaugeValue, float64(w.s.Limit), w.name)
	}
}
