// Package metrics exposes the server's Prometheus metrics. It implements
// skuld.Observer for the send pipeline and api.Metrics for the HTTP layer,
// so that neither imports Prometheus, and reads the throttle's windows at
// scrape time. Every metric lives in the Registry of one Metrics: there is
// no global state, and two servers in one test process do not share counts.
//
// No label carries a secret, an address or an id: providers, outcomes,
// windows, route templates ("/v1/messages/:id", never the URL), methods,
// status codes and MCP tool names only.
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

	"github.com/nornweave/nornweave/skuld/throttle"
)

const namespace = "nornweave"

// Throttle is the throttle whose windows are reported, of whichever
// backend.
type Throttle interface {
	State(ctx context.Context, inbox string, o throttle.Override) (throttle.Snapshot, error)
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
	toolCalls       *prometheus.CounterVec
	lateness        prometheus.Histogram
	events          *prometheus.CounterVec
	unknownEvents   *prometheus.CounterVec
	suppressions    *prometheus.CounterVec
	webhookRefusals *prometheus.CounterVec
	webhookAttempts *prometheus.CounterVec
}

// New registers every metric in a new registry: the server's own; the
// throttle's windows, read from th at each scrape, with whether its backend
// answered; the sends admitted unthrottled (unthrottled, under
// THROTTLE_FAIL=open); build information, and the Go runtime and process
// collectors.
func New(version string, th Throttle, backend string, unthrottled func() int64) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.sends = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "sends_total",
		Help: "Sends admitted by the throttle, by provider, final outcome (sent, failed, unknown) and the " +
			"failure's cause (providers.Causes; empty when sent)."},
		[]string{"provider", "outcome", "cause"})
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
		Help: "HTTP requests by method, route template and status code."}, []string{"method", "route", "code"})
	m.requestSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace,
		Name: "http_request_duration_seconds", Help: "HTTP request duration by method and route template.",
		Buckets: prometheus.DefBuckets}, []string{"method", "route"})
	m.replays = prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "idempotent_replays_total",
		Help: "Responses replayed for a repeated Idempotency-Key instead of sending again."})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "mcp_tool_calls_total",
		Help: "MCP tool calls by tool and outcome: ok, or the refusal's code (rate_limited, domain_blocked, " +
			"not_found, validation_error, internal_error, ...), the REST API's codes."},
		[]string{"tool", "outcome"})
	m.lateness = newLateness()
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "delivery_events_total",
		Help: "Delivery events stored (each once), by provider and type (delivered, bounced, complained, ...)."},
		[]string{"provider", "type"})
	m.unknownEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "delivery_events_unknown_total",
		Help: "Delivery events ignored because they name a message this server did not send, by provider."},
		[]string{"provider"})
	m.suppressions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "suppressions_added_total",
		Help: "Addresses added to the suppression list, by reason (bounce, complaint, manual)."}, []string{"reason"})
	m.webhookRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace,
		Name: "webhook_refusals_total",
		Help: "Provider webhooks refused, by provider and cause (invalid_signature, not_configured, too_large, " +
			"invalid_payload, busy)."}, []string{"provider", "cause"})
	build := prometheus.NewGauge(prometheus.GaugeOpts{Namespace: namespace, Name: "build_info",
		Help:        "Always 1; the labels say which build is running.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()}})
	build.Set(1)
	unthrottledSends := prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: namespace,
		Name: "throttle_unthrottled_sends_total",
		Help: "Sends admitted without the throttle because its backend could not be asked (THROTTLE_FAIL=open)."},
		func() float64 { return float64(unthrottled()) })
	m.webhookAttempts = newWebhookAttempts()
	m.reg.MustRegister(m.webhookAttempts, m.sends, m.providerSeconds, m.retries, m.refusals, m.requests, m.requestSeconds,
		m.replays, m.toolCalls, m.lateness, m.events, m.unknownEvents, m.suppressions, m.webhookRefusals, build, unthrottledSends, &windowCollector{throttle: th, backend: backend},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Every window appears from the first scrape, at zero.
	for _, w := range throttle.Windows {
		m.refusals.WithLabelValues(w.String())
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
func (m *Metrics) SendFinished(provider, outcome, cause string) {
	m.sends.WithLabelValues(provider, outcome, cause).Inc()
}

// Retried implements skuld.Observer.
func (m *Metrics) Retried(provider string) { m.retries.WithLabelValues(provider).Inc() }

// Refused implements skuld.Observer.
func (m *Metrics) Refused(windows []throttle.Window) {
	for _, w := range windows {
		m.refusals.WithLabelValues(w.String()).Inc()
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

// ToolCall implements api.Metrics: one MCP tool call answered.
func (m *Metrics) ToolCall(tool, outcome string) { m.toolCalls.WithLabelValues(tool, outcome).Inc() }

// Recorded implements events.Observer: a delivery event stored, and the
// reason of the suppression it added ("" for none).
func (m *Metrics) Recorded(provider, eventType, suppressedFor string) {
	m.events.WithLabelValues(provider, eventType).Inc()
	if suppressedFor != "" {
		m.suppressions.WithLabelValues(suppressedFor).Inc()
	}
}

// Unknown implements events.Observer.
func (m *Metrics) Unknown(provider string) { m.unknownEvents.WithLabelValues(provider).Inc() }

// Suppressed implements api.Metrics: an address added by hand.
func (m *Metrics) Suppressed(reason string) { m.suppressions.WithLabelValues(reason).Inc() }

// WebhookRefused implements api.Metrics.
func (m *Metrics) WebhookRefused(provider, cause string) {
	m.webhookRefusals.WithLabelValues(provider, cause).Inc()
}

// windowCollector reports the global windows as they are at the scrape, so
// the gauges are never stale and cost nothing between scrapes, and whether
// the throttle's backend answered. With a shared backend the windows are
// the cluster's: every server reports the same numbers (aggregate with
// max(), not sum()).
type windowCollector struct {
	throttle Throttle
	backend  string
}

var (
	windowUsed = prometheus.NewDesc(namespace+"_throttle_window_used",
		"Committed sends inside the window (with a shared backend, the cluster's: every server reports it).",
		[]string{"window"}, nil)
	windowInFlight = prometheus.NewDesc(namespace+"_throttle_window_in_flight",
		"Sends admitted and not yet answered by the provider (the cluster's with a shared backend).",
		[]string{"window"}, nil)
	windowLimit = prometheus.NewDesc(namespace+"_throttle_window_limit", "The window's limit; 0 is unlimited.",
		[]string{"window"}, nil)
	backendUp = prometheus.NewDesc(namespace+"_throttle_backend_up",
		"1 if the throttle's backend answered at this scrape, else 0 (memory: always 1).", []string{"backend"}, nil)
)

func (c *windowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- windowUsed
	ch <- windowInFlight
	ch <- windowLimit
	ch <- backendUp
}

func (c *windowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	snap, err := c.throttle.State(ctx, "", throttle.Override{})
	up := 1.0
	if err != nil {
		up = 0
	}
	ch <- prometheus.MustNewConstMetric(backendUp, prometheus.GaugeValue, up, c.backend)
	if err != nil {
		return // a shared backend that cannot be read: no window gauges this scrape
	}
	// The minute and the hour always; the second and the day when
	// limited (Snapshot.States), as the headers list them.
	for _, w := range snap.States() {
		name := w.Window.String()
		ch <- prometheus.MustNewConstMetric(windowUsed, prometheus.GaugeValue, float64(w.Used), name)
		ch <- prometheus.MustNewConstMetric(windowInFlight, prometheus.GaugeValue, float64(w.InFlight), name)
		ch <- prometheus.MustNewConstMetric(windowLimit, prometheus.GaugeValue, float64(w.Limit), name)
	}
}
