package metrics

import (
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
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
