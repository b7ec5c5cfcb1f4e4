package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
)

func TestMetricsCountAndWindowsReadAtScrape(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 5, PerHour: 100}, throttle.Limits{})
	m := New("v1.2.3", throttle.NewMemory(lim, clock), "memory", func() int64 { return 7 })

	m.SendFinished("smtp", skuld.OutcomeSent, "")
	m.SendFinished("smtp", skuld.OutcomeFailed, "rejected")
	m.ProviderCall("smtp", skuld.OutcomeSent, 40*time.Millisecond)
	m.Refused([]throttle.Window{throttle.GlobalMinute, throttle.GlobalHour, throttle.InboxMinute})
	m.Request("GET", "/v1/messages/:id", 404, time.Millisecond)
	m.Replayed()
	m.ToolCall("send_email", "rate_limited")
	m.ToolCall("send_email", "ok")
	m.ToolCall("send_email", "ok")
	m.Recorded("ses", "bounced", "bounce")
	m.Recorded("ses", "bounced", "") // soft, or the address was on the list already
	m.Recorded("sendgrid", "complained", "complaint")
	m.Unknown("resend")
	m.Suppressed("manual")
	m.WebhookRefused("mailgun", "invalid_signature")
	m.WatchReputation(reputation{}, clock.Now)
	if got := testutil.ToFloat64(m.sends.WithLabelValues("smtp", "sent", "")); got != 1 {
		t.Errorf("sends sent = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("per-hour")); got != 1 {
		t.Errorf("refusals per-hour = %v, want 1", got)
	}

	res, err := lim.Reserve(clock.Mono(), time.Minute, "", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	res.Commit(clock.Mono())
	if _, err := lim.Reserve(clock.Mono(), time.Minute, "", throttle.Override{}); err != nil { // left in flight
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`nornweave_throttle_window_used{window="per-minute"} 1`,
		`nornweave_throttle_window_in_flight{window="per-minute"} 1`,
		`nornweave_throttle_window_limit{window="per-hour"} 100`,
		`nornweave_build_info{goversion="`, `version="v1.2.3"} 1`,
		`nornweave_http_requests_total{code="404",method="GET",route="/v1/messages/:id"} 1`,
		`nornweave_sends_total{cause="rejected",outcome="failed",provider="smtp"} 1`,
		`nornweave_throttle_refusals_total{window="inbox-per-minute"} 1`,
		`nornweave_throttle_refusals_total{window="inbox-per-hour"} 0`,
		`nornweave_throttle_backend_up{backend="memory"} 1`,
		`nornweave_throttle_unthrottled_sends_total 7`,
		`nornweave_idempotent_replays_total 1`,
		`nornweave_mcp_tool_calls_total{outcome="ok",tool="send_email"} 2`,
		`nornweave_mcp_tool_calls_total{outcome="rate_limited",tool="send_email"} 1`,
		`nornweave_provider_request_duration_seconds_count{outcome="sent",provider="smtp"} 1`,
		`nornweave_delivery_events_total{provider="ses",type="bounced"} 2`,
		`nornweave_delivery_events_total{provider="sendgrid",type="complained"} 1`,
		`nornweave_delivery_events_unknown_total{provider="resend"} 1`,
		`nornweave_suppressions_added_total{reason="bounce"} 1`,
		`nornweave_suppressions_added_total{reason="complaint"} 1`,
		`nornweave_suppressions_added_total{reason="manual"} 1`,
		`nornweave_webhook_refusals_total{cause="invalid_signature",provider="mailgun"} 1`,
		`nornweave_sent_24h 200`,
		`nornweave_bounce_rate_24h 0.03`,
		`nornweave_complaint_rate_24h 0.005`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// reputation is a day of 200 sends, 6 hard bounces and a complaint, for
// any window asked.
type reputation struct{}

func (reputation) Reputation(context.Context, time.Time) (int64, int64, int64, error) {
	return 200, 6, 1, nil
}
