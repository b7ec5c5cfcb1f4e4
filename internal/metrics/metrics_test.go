package metrics

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/nornweave/nornweave/internal/clocktest"
	"github.com/nornweave/nornweave/skuld"
)

func TestMetricsCountAndWindowsReadAtScrape(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := skuld.NewGlobalRateLimiter(5, 100)
	m := New("v1.2.3", skuld.NewMemoryThrottle(lim, clock), clock)

	m.SendFinished("smtp", skuld.OutcomeSent)
	m.SendFinished("smtp", skuld.OutcomeFailed)
	m.ProviderCall("smtp", skuld.OutcomeSent, 40*time.Millisecond)
	m.Refused([]string{"per-minute", "per-hour"})
	m.Request("GET", "/v1/messages/:id", 404, time.Millisecond)
	m.Replayed()
	if got := testutil.ToFloat64(m.sends.WithLabelValues("smtp", "sent")); got != 1 {
		t.Errorf("sends sent = %v, want 1", got)
	}
	if got := testutil.ToFloat64(m.refusals.WithLabelValues("per-hour")); got != 1 {
		t.Errorf("refusals per-hour = %v, want 1", got)
	}

	res, err := lim.Reserve(clock.Mono(), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res.Commit(clock.Mono())
	if _, err := lim.Reserve(clock.Mono(), time.Minute); err != nil { // left in flight
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
		`nornweave_http_requests_total{method="GET",route="/v1/messages/:id",status="404"} 1`,
		`nornweave_idempotent_replays_total 1`,
		`nornweave_provider_request_duration_seconds_count{outcome="sent",provider="smtp"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}
