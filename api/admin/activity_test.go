package admin

import (
	"strings"
	"testing"
	"time"
)

// activity is an hour and a week of sends with a known shape: minute 0
// 12 sent and 1 failed, minute 1 nothing, minute 2 only 3 failures; hour
// 0 40 sent; refusals of every reason.
func activity() *Activity {
	minutes := buckets(time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC), time.Minute, 60, 12, 1, 0, 0, 0, 3)
	hours := buckets(time.Date(2026, 11, 20, 8, 0, 0, 0, time.UTC), time.Hour, 168, 40, 0)
	return &Activity{Minutes: minutes, Hours: hours,
		Refusals: []Refusal{{"throttled", 7}, {"domain_blocked", 0}, {"suppressed", 2}, {"validation", 1}},
	}
}

func TestOverviewCharts(t *testing.T) {
	hs := newHarness(t, "")
	if body := hs.do("GET", "/admin", nil, nil).Body.String(); strings.Contains(body, `id="activity"`) {
		t.Errorf("no Activity: the charts are shown:\n%s", body)
	}
	hs.ov.Activity = activity()
	body := hs.do("GET", "/admin", nil, nil).Body.String()
	mustContain(t, body,
		`<svg class="chart" viewBox="0 0 720 120" role="img" aria-label="Sends per minute, last hour: 12 sent, 4 failed">`,
		`<span id="minutes-sent">12</span>`, `<span id="minutes-failed">4</span>`,
		// 13 is the largest total: 12 sent are 92 units, 1 failure 7.
		`<g class="bucket" data-start="2026-11-27T07:00:00Z" data-sent="12" data-failed="1"><title>07:00 UTC: 12 sent, 1 failed</title>`+
			`<rect class="slot" x="0" y="0" width="11" height="100"/><rect class="sent" x="0" y="8" width="11" height="92"/>`+
			`<rect class="failed" x="0" y="1" width="11" height="7"/></g>`,
		`<g class="bucket" data-start="2026-11-27T07:01:00Z" data-sent="0" data-failed="0"><title>07:01 UTC: 0 sent, 0 failed</title>`+
			`<rect class="slot" x="12" y="0" width="11" height="100"/></g>`,
		`<g class="bucket" data-start="2026-11-27T07:02:00Z" data-sent="0" data-failed="3"><title>07:02 UTC: 0 sent, 3 failed</title>`+
			`<rect class="slot" x="24" y="0" width="11" height="100"/><rect class="failed" x="24" y="77" width="11" height="23"/></g>`,
		`<text class="start" x="0" y="100" dy="14">07:00</text>`, `<text class="middle" x="366" y="100" dy="14">07:30</text>`,
		`<text class="end" x="720" y="100" dy="14">07:59</text>`,
		`aria-label="Sends per hour, last week: 40 sent, 0 failed"`, `<span id="hours-sent">40</span>`, `<span id="hours-failed">0</span>`,
		`<g class="bucket" data-start="2026-11-20T08:00:00Z" data-sent="40" data-failed="0"><title>Nov 20 08:00 UTC: 40 sent, 0 failed</title>`,
		`<text class="end" x="672" y="100" dy="14">Nov 27 07:00</text>`,
		`<span class="key sent"></span>`, `<span class="key failed"></span>`)
	if n := strings.Count(body, `<g class="bucket"`); n != 60+168 {
		t.Errorf("%d bars, want 228", n)
	}
}

func TestOverviewRefusals(t *testing.T) {
	hs := newHarness(t, "")
	hs.ov.Activity = activity()
	hs.ov.Activity.Refusals = append(hs.ov.Activity.Refusals, Refusal{hostile, 1})
	body := hs.do("GET", "/admin", nil, nil).Body.String()
	mustContain(t, body,
		`<tr data-reason="throttled"><th scope="row">Throttled (429)</th><td class="count">7</td></tr>`,
		`<tr data-reason="domain_blocked"><th scope="row">Domain blocked</th><td class="count">0</td></tr>`,
		`<tr data-reason="suppressed"><th scope="row">Suppressed recipient</th><td class="count">2</td></tr>`,
		`<tr data-reason="validation"><th scope="row">Validation</th><td class="count">1</td></tr>`,
		`<th scope="row">`+hostileEscaped+`</th>`)
	mustNotContain(t, body, "<script>", "<svg onload")
	for i, r := range RefusalReasons {
		if refusalLabel(r) == r {
			t.Errorf("RefusalReasons[%d] %q has no label", i, r)
		}
	}
}

// A rate is warned over its threshold, not at it; before any delivery
// event, a line says so.
func TestOverviewReputation(t *testing.T) {
	hs := newHarness(t, "")
	hs.ov.Activity = activity()
	mustContain(t, hs.do("GET", "/admin", nil, nil).Body.String(), `<p id="no-reputation">No delivery events yet.</p>`)
	for _, tt := range []struct {
		name string
		r    Reputation
		want []string
	}{
		{"at the thresholds", Reputation{Sent: 10000, Bounced: 500, Complained: 10}, []string{
			`<tr class="rate"><th scope="row">Bounce rate</th><td id="bounce-rate">5.00 %</td><td class="threshold">5 %</td></tr>`,
			`<tr class="rate"><th scope="row">Complaint rate</th><td id="complaint-rate">0.100 %</td><td class="threshold">0.1 %</td></tr>`}},
		{"just over them", Reputation{Sent: 100000, Bounced: 5010, Complained: 101}, []string{
			`<tr class="rate warn"><th scope="row">Bounce rate</th><td id="bounce-rate">5.01 %</td>`,
			`<tr class="rate warn"><th scope="row">Complaint rate</th><td id="complaint-rate">0.101 %</td>`}},
		{"nothing sent", Reputation{Bounced: 2}, []string{
			`<tr class="rate"><th scope="row">Bounce rate</th><td id="bounce-rate">0.00 %</td>`,
			`<span id="reputation-sent">0</span>`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hs.ov.Activity.Reputation = &tt.r
			body := hs.do("GET", "/admin", nil, nil).Body.String()
			mustContain(t, body, tt.want...)
			mustNotContain(t, body, `id="no-reputation"`)
		})
	}
}
