package tests

import (
	"net/http"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// /metrics moves after a send, a provider failure and a 429, and no label
// carries an id, an address or a key.
func TestMetricsMoveAfterSendFailureAndRefusal(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) {
		c.SendRateLimitPerMinute, c.APIKey = 1, "key"
	})
	k := []string{"X-API-Key", "key"}
	inbox := s.createInbox(t, "support", k...)
	send := map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"}, "subject": "Hi", "body": "x"}

	s.SMTP.RejectData(554, [3]int{5, 7, 1}, "rejected by policy")
	if r := s.do(t, "POST", "/v1/messages", send, k...); r.JSON(t)["status"] != "failed" {
		t.Fatalf("first send = %s, want failed", r.Body)
	}
	s.SMTP.AcceptData()
	r := s.do(t, "POST", "/v1/messages", send, append(k, "Idempotency-Key", "m1")...)
	if r.JSON(t)["status"] != "sent" {
		t.Fatalf("second send = %s, want sent", r.Body)
	}
	mustStatus(t, s.do(t, "POST", "/v1/messages", send, append(k, "Idempotency-Key", "m1")...), http.StatusCreated)
	mustStatus(t, s.do(t, "POST", "/v1/messages", send, k...), http.StatusTooManyRequests)

	r = s.do(t, "GET", "/metrics", nil) // open: no METRICS_API_KEY, and API_KEY does not apply
	mustStatus(t, r, http.StatusOK)
	body := string(r.Body)
	for _, want := range []string{
		`nornweave_sends_total{cause="rejected",outcome="failed",provider="smtp"} 1`,
		`nornweave_sends_total{cause="",outcome="sent",provider="smtp"} 1`,
		`nornweave_throttle_refusals_total{window="per-minute"} 1`,
		`nornweave_throttle_refusals_total{window="per-hour"} 0`,
		`nornweave_throttle_window_used{window="per-minute"} 1`,
		`nornweave_throttle_window_in_flight{window="per-minute"} 0`,
		`nornweave_throttle_window_limit{window="per-minute"} 1`,
		`nornweave_provider_request_duration_seconds_count{outcome="failed",provider="smtp"} 1`,
		`nornweave_provider_request_duration_seconds_count{outcome="sent",provider="smtp"} 1`,
		`nornweave_http_requests_total{code="201",method="POST",route="/v1/messages"} 3`,
		`nornweave_http_requests_total{code="429",method="POST",route="/v1/messages"} 1`,
		`nornweave_http_requests_total{code="201",method="POST",route="/v1/inboxes"} 1`,
		`nornweave_idempotent_replays_total 1`,
		`nornweave_build_info{goversion="`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, secret := range []string{inbox, "bob@customer.test", "support@acme.test", "key\"", s.SMTP.Addr()} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}
}

func TestMetricsKeyGuardsMetrics(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { c.MetricsAPIKey = "mk" })
	mustStatus(t, s.do(t, "GET", "/metrics", nil), http.StatusUnauthorized)
	mustStatus(t, s.do(t, "GET", "/metrics", nil, "Authorization", "Bearer mk"), http.StatusOK)
}
