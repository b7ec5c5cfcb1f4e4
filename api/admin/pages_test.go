package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// window is rows[offset:offset+limit], as a store's LIMIT/OFFSET.
func window[T any](rows []T, limit, offset int) []T {
	if offset >= len(rows) {
		return nil
	}
	return rows[offset:min(len(rows), offset+limit)]
}

// hostile is user text that must render as text.
const hostile = `<script>alert(1)</script>"><svg onload=alert(2)>` + "\u202Etxt.exe"

// hostileEscaped is hostile as html/template writes it in text.
const hostileEscaped = `&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;svg onload=alert(2)&gt;` + "\u202Etxt.exe"

func mustContain(t *testing.T, body string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(body, w) {
			t.Errorf("page lacks %q:\n%s", w, body)
		}
	}
}

func mustNotContain(t *testing.T, body string, bads ...string) {
	t.Helper()
	for _, b := range bads {
		if strings.Contains(body, b) {
			t.Errorf("page contains %q:\n%s", b, body)
		}
	}
}

// Each page: the session redirect with API_KEY, 200 with a session, the
// nav with the page marked current and only it.
func TestPagesNeedASessionAndMarkTheNav(t *testing.T) {
	hs := newHarness(t, key)
	ck := sessionCookie(t, hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil))
	for _, tt := range []struct{ path, page string }{
		{"/admin", "/admin"}, {"/admin/held", "/admin/held"},
		{"/admin/messages", "/admin/messages"}, {"/admin/messages/unknown", "/admin/messages"},
		{"/admin/suppressions", "/admin/suppressions"}, {"/admin/webhooks", "/admin/webhooks"},
	} {
		if rec := hs.do("GET", tt.path, nil, nil); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
			t.Errorf("GET %s without a session = %d %q, want 303 to /admin/login", tt.path, rec.Code, rec.Header().Get("Location"))
		}
		rec := hs.do("GET", tt.path, nil, ck)
		body := rec.Body.String()
		if rec.Code != http.StatusOK && !(tt.path == "/admin/messages/unknown" && rec.Code == http.StatusNotFound) {
			t.Fatalf("GET %s with a session = %d:\n%s", tt.path, rec.Code, body)
		}
		mustContain(t, body, fmt.Sprintf(`<a href="%s" aria-current="page">`, tt.page), "/admin/logout")
		if n := strings.Count(body, `aria-current="page"`); n != 1 {
			t.Errorf("GET %s: %d entries marked current, want 1", tt.path, n)
		}
		for _, other := range []string{"/admin", "/admin/messages", "/admin/held", "/admin/suppressions", "/admin/webhooks"} {
			if other != tt.page {
				mustContain(t, body, fmt.Sprintf(`<a href="%s">`, other))
			}
		}
	}
}

func TestHeldPage(t *testing.T) {
	hs := newHarness(t, "")
	at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	if body := hs.do("GET", "/admin/held", nil, nil).Body.String(); !strings.Contains(body, `<p id="empty">No mail is held`) {
		t.Errorf("no held mail: want the empty state:\n%s", body)
	}
	hs.held = []HeldMessage{
		{ID: "m1", InboxID: "in-a", Status: "queued", Subject: "First", Recipients: 3, NextAttempt: at},
		{ID: "m2", InboxID: "in-a", Status: "scheduled", Subject: hostile, Recipients: 1, ScheduledAt: at.Add(time.Hour)},
		{ID: "m3", InboxID: `in-"><b>`, Status: "scheduled", Subject: "Third", Recipients: 2, ScheduledAt: at},
	}
	rec := hs.do("GET", "/admin/held", nil, nil)
	body := rec.Body.String()
	if rec.Code != http.StatusOK || fmt.Sprint(hs.asked) != fmt.Sprint([]any{HeldPageSize + 1, 0}) {
		t.Fatalf("GET /admin/held = %d, asked %v; want 200 and a page of %d+1 from 0", rec.Code, hs.asked, HeldPageSize)
	}
	mustContain(t, body,
		`<section class="inbox" data-inbox="in-a">`, `data-inbox="in-&#34;&gt;&lt;b&gt;"`, "<bdi>in-&#34;&gt;&lt;b&gt;</bdi>",
		`<tr class="held" data-message="m1">`, `<td class="recipients">3</td>`,
		`<td class="next"><time datetime="2026-11-27T09:00:00Z">`,
		`<td class="scheduled"><time datetime="2026-11-27T10:00:00Z">`,
		`<td class="subject"><bdi>`+hostileEscaped+`</bdi></td>`, `1–3`)
	mustNotContain(t, body, "<script>", "<svg", "<b>", `rel="next"`, `rel="prev"`, `id="empty"`)
	// Grouped: m1 and m2 under in-a, in the order given.
	if a, m1, m2, b := strings.Index(body, `data-inbox="in-a"`), strings.Index(body, `"m1"`), strings.Index(body, `"m2"`),
		strings.Index(body, `data-inbox="in-&#34;`); !(a < m1 && m1 < m2 && m2 < b) {
		t.Errorf("rows out of their groups: in-a at %d, m1 %d, m2 %d, the second inbox %d", a, m1, m2, b)
	}
}

// 450 held: three pages of at most 200, linked both ways; an offset past
// the end shows no row, and a bad one the first page.
func TestHeldPaging(t *testing.T) {
	hs := newHarness(t, "")
	for i := range 450 {
		hs.held = append(hs.held, HeldMessage{ID: fmt.Sprintf("m%03d", i), InboxID: "in", Status: "queued"})
	}
	for _, tt := range []struct {
		query      string
		rows       int
		first      string
		prev, next string
	}{
		{"", 200, "m000", "", "/admin/held?offset=200"},
		{"?offset=200", 200, "m200", "/admin/held", "/admin/held?offset=400"},
		{"?offset=400", 50, "m400", "/admin/held?offset=200", ""},
		{"?offset=900", 0, "", "/admin/held?offset=700", ""},
		{"?offset=-5", 200, "m000", "", "/admin/held?offset=200"},
		{"?offset=x", 200, "m000", "", "/admin/held?offset=200"},
	} {
		t.Run(tt.query, func(t *testing.T) {
			body := hs.do("GET", "/admin/held"+tt.query, nil, nil).Body.String()
			if n := strings.Count(body, `<tr class="held"`); n != tt.rows {
				t.Errorf("%d rows, want %d", n, tt.rows)
			}
			if tt.first != "" && !strings.Contains(body, `<tr class="held" data-message="`+tt.first+`">`) {
				t.Errorf("first row %s missing", tt.first)
			}
			for rel, want := range map[string]string{"prev": tt.prev, "next": tt.next} {
				has := strings.Contains(body, `rel="`+rel+`"`)
				if want == "" && has || want != "" && !strings.Contains(body, `rel="`+rel+`" href="`+want+`"`) {
					t.Errorf("%s link: want %q:\n%s", rel, want, body[strings.Index(body, `<nav class="paging"`):])
				}
			}
			if tt.rows == 0 && !strings.Contains(body, "No held mail on this page.") {
				t.Errorf("past the end: want its empty state")
			}
		})
	}
}

func TestSuppressionsPage(t *testing.T) {
	hs := newHarness(t, "")
	if body := hs.do("GET", "/admin/suppressions", nil, nil).Body.String(); !strings.Contains(body, `<p id="empty">No address is suppressed.`) {
		t.Errorf("empty list: want the empty state:\n%s", body)
	}
	at := time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)
	for i := range 250 {
		hs.sups = append(hs.sups, Suppression{Email: fmt.Sprintf("u%03d@acme.test", i), Reason: "bounce", Source: "ses", CreatedAt: at})
	}
	hs.sups[0] = Suppression{Email: hostile + "@acme.test", Reason: "manual", Source: "api", MessageID: `msg"><i>`, CreatedAt: at}
	body := hs.do("GET", "/admin/suppressions", nil, nil).Body.String()
	if fmt.Sprint(hs.asked) != fmt.Sprint([]any{"", SuppressionPageSize, 0}) {
		t.Errorf("asked %v, want every reason, %d from 0", hs.asked, SuppressionPageSize)
	}
	mustContain(t, body, `<td class="email"><bdi>`+hostileEscaped+`@acme.test</bdi></td>`,
		`<td class="message"><bdi>msg&#34;&gt;&lt;i&gt;</bdi></td>`, `<td class="source"><bdi>ses</bdi></td>`,
		`<time datetime="2026-11-27T07:00:00Z">`, "1–100 of 250", `rel="next" href="/admin/suppressions?offset=100"`,
		`<form method="get" action="/admin/suppressions"`, `<option value="bounce">`)
	mustNotContain(t, body, "<script>", "<svg", "<i>", `rel="prev"`)
	if n := strings.Count(body, `<tr class="suppression">`); n != 100 {
		t.Errorf("%d rows, want 100", n)
	}
	// The filter is passed on, kept by the form and the links; an unknown
	// reason filters nothing.
	body = hs.do("GET", "/admin/suppressions?reason=bounce&offset=200", nil, nil).Body.String()
	if fmt.Sprint(hs.asked) != fmt.Sprint([]any{"bounce", SuppressionPageSize, 200}) {
		t.Errorf("asked %v, want bounce, %d from 200", hs.asked, SuppressionPageSize)
	}
	mustContain(t, body, `<option value="bounce" selected>`, `rel="prev" href="/admin/suppressions?offset=100&amp;reason=bounce"`, "201–250 of 250")
	mustNotContain(t, body, `rel="next"`)
	hs.do("GET", "/admin/suppressions?reason=%3Cscript%3E", nil, nil)
	if hs.asked[0] != "" {
		t.Errorf("an unknown reason was asked for as %q, want \"\"", hs.asked[0])
	}
}

func TestWebhooksPage(t *testing.T) {
	hs := newHarness(t, "")
	if body := hs.do("GET", "/admin/webhooks", nil, nil).Body.String(); !strings.Contains(body, `<p id="empty">No webhook endpoint`) {
		t.Errorf("no endpoints: want the empty state:\n%s", body)
	}
	at := time.Date(2026, 11, 27, 6, 0, 0, 0, time.UTC)
	hs.hooks = []WebhookEndpoint{
		{ID: "we1", URL: "https://hooks.test/" + hostile, Events: []string{"message.sent", "message.failed"}, Enabled: false,
			DisabledReason: "410 " + hostile, FailingSince: at, CreatedAt: at,
			Deliveries: []WebhookDelivery{
				{EventType: "message.failed", Attempt: 2, StatusCode: 500, LatencyMS: 42, Error: hostile, NextRetryAt: at.Add(time.Minute), At: at},
				{EventType: "message.sent", Attempt: 1, LatencyMS: 7, Error: "dial tcp: refused", At: at.Add(-time.Minute)},
			}},
		{ID: "we2", URL: "http://127.0.0.1:9/h", Enabled: true, CreatedAt: at},
	}
	body := hs.do("GET", "/admin/webhooks", nil, nil).Body.String()
	mustContain(t, body, `<bdi class="url">https://hooks.test/`+hostileEscaped+`</bdi>`,
		`<bdi>message.sent</bdi>, <bdi>message.failed</bdi>`, `<dd class="enabled">no: <bdi>410 `+hostileEscaped+`</bdi></dd>`,
		`<dd class="failing"><time datetime="2026-11-27T06:00:00Z">`,
		`<td class="code">500</td>`, `<td class="latency">42 ms</td>`, `<td class="error"><bdi>`+hostileEscaped+`</bdi></td>`,
		`<td class="retry"><time datetime="2026-11-27T06:01:00Z">`, `<td class="code">—</td>`,
		`<section class="endpoint" data-endpoint="we2">`, `<dd class="events">all</dd>`, `<dd class="enabled">yes</dd>`,
		"No delivery attempted yet.")
	mustNotContain(t, body, "<script>", "<svg", `id="empty"`)
}

// The headers of the new pages are set by the api package's middleware
// (api/admin_test.go checks them there); here, no page has an inline
// script, style or event handler for the CSP to refuse: its one script is
// the served htmx, told to inject no style and evaluate nothing.
func TestPagesHaveNothingInline(t *testing.T) {
	hs := newHarness(t, "")
	hs.held = []HeldMessage{{ID: "m", InboxID: "i", Status: "queued"}}
	hs.sups = []Suppression{{Email: "a@b.test", Reason: "manual"}}
	hs.hooks = []WebhookEndpoint{{ID: "w", URL: "https://h.test/", Deliveries: []WebhookDelivery{{EventType: "x"}}}}
	hs.ov.Activity = activity()
	hs.ov.Activity.Reputation = &Reputation{Sent: 10, Bounced: 1}
	for _, path := range []string{"/admin", "/admin/held", "/admin/suppressions", "/admin/webhooks"} {
		body := hs.do("GET", path, nil, nil).Body.String()
		const htmx = `<script src="/admin/htmx.min.js" defer></script>`
		if n, all := strings.Count(body, htmx), strings.Count(body, "<script"); n != 1 || all != 1 {
			t.Errorf("GET %s: %d htmx script tags of %d, want the one:\n%s", path, n, all, body)
		}
		mustContain(t, body, `<meta name="htmx-config" content='{"includeIndicatorStyles":false,"allowEval":false,"allowScriptTags":false}'>`)
		mustNotContain(t, body, "<style", " style=", " onload=", " onclick=", "javascript:", "hx-on")
	}
}
