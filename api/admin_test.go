package api

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/store"
)

// adminStore lists two inboxes; the second is the busier.
type adminStore struct{ fakeStore }

func (adminStore) Inboxes(context.Context, int, int) ([]store.Inbox, error) {
	five := 5
	return []store.Inbox{{ID: "quiet", EmailAddress: "quiet@acme.test", Name: "Quiet"},
		{ID: "busy", EmailAddress: "busy@acme.test", Name: "Busy", RateLimitPerMinute: &five}}, nil
}

// BusiestInboxes finds none busy: the overview shows the inboxes by
// address, the busier first by its windows.
// SendCounts answers, for the minute under way, 3 sent, 1 failed and 1 of
// unknown delivery; for the hour, those and 2 throttled and 1 refused as
// invalid, and 40 sent 30 hours ago, outside the reputation's day.
func (adminStore) SendCounts(_ context.Context, width string, _, to time.Time) ([]store.SendCount, error) {
	if width == store.WidthMinute {
		at := to.Add(-time.Minute)
		return []store.SendCount{{Width: width, Start: at, Kind: "failed", Count: 1}, {Width: width, Start: at, Kind: "sent", Count: 3},
			{Width: width, Start: at, Kind: "unknown", Count: 1}}, nil
	}
	at := to.Add(-time.Hour)
	return []store.SendCount{{Width: width, Start: at.Add(-30 * time.Hour), Kind: "sent", Count: 40},
		{Width: width, Start: at, Kind: "failed", Count: 1}, {Width: width, Start: at, Kind: "sent", Count: 3},
		{Width: width, Start: at, Kind: "throttled", Count: 2}, {Width: width, Start: at, Kind: "unknown", Count: 1},
		{Width: width, Start: at, Kind: "validation", Count: 1}}, nil
}

// Complaints answers one hard bounce.
func (adminStore) Complaints(context.Context, time.Time) (int64, int64, error) { return 1, 0, nil }

func (adminStore) BusiestInboxes(context.Context, time.Time, int) ([]store.Inbox, error) {
	return nil, nil
}

type fakeHeld struct{}

// HeldPage answers one queued and one scheduled message of inbox "busy",
// the second with a hostile subject, whatever the page.
func (fakeHeld) HeldPage(_ context.Context, limit, offset int) ([]store.Message, error) {
	if offset > 0 {
		return nil, nil
	}
	next, at := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	return []store.Message{
		{ID: "q1", InboxID: "busy", Status: store.StatusQueued, Subject: "Queued", NextAttemptAt: &next,
			ToAddresses: store.StringList{"a@x.test", "b@x.test"}, CcAddresses: store.StringList{"c@x.test"}},
		{ID: "s1", InboxID: "busy", Status: store.StatusScheduled, Subject: adminHostile, ScheduledAt: &at,
			BccAddresses: store.StringList{"d@x.test"}},
	}[:min(2, limit)], nil
}

// adminHostile is user text that must render as text.
const adminHostile = `<script>alert(1)</script>"><svg onload=alert(2)>` + "\u202E"

// Suppressions answers one hostile address; it records the filter.
func (adminStore) Suppressions(_ context.Context, f store.SuppressionFilter) ([]store.Suppression, int64, error) {
	msg := "m1"
	return []store.Suppression{{Email: adminHostile + "@x.test", Reason: f.Reason + "manual", Source: "api", MessageID: &msg,
		CreatedAt: time.Date(2026, 11, 27, 7, 0, 0, 0, time.UTC)}}, 1, nil
}

// WebhookEndpoints answers one endpoint with a secret, whose log holds 25
// attempts.
func (adminStore) WebhookEndpoints(context.Context) ([]store.WebhookEndpoint, error) {
	why := "failing: " + adminHostile
	return []store.WebhookEndpoint{{ID: "we1", URL: "http://127.0.0.1:9/" + adminHostile, Secret: "whsec_TOPSECRET",
		PreviousSecret: &why, DisabledReason: &why, Events: store.StringList{"message.sent"}}}, nil
}

// LatestWebhookDeliveries answers the last n of a log of 25 attempts, 1
// to 25, newest first, as the store does.
func (adminStore) LatestWebhookDeliveries(_ context.Context, endpointID string, n int) ([]store.WebhookDelivery, error) {
	var out []store.WebhookDelivery
	for i := 25; i >= 1 && len(out) < n; i-- {
		code, e := 500, adminHostile
		out = append(out, store.WebhookDelivery{EndpointID: endpointID, EventType: "message.sent", Attempt: i,
			StatusCode: &code, Error: &e, LatencyMS: int64(i)})
	}
	return out, nil
}

func (fakeHeld) HeldStats(context.Context) (store.HeldStats, error) {
	return store.HeldStats{Count: map[string]int64{store.StatusScheduled: 2, store.StatusQueued: 1},
		OldestQueued: time.Now().Add(-95 * time.Second)}, nil
}

func newAdminTestAPI(apiKey string, limit int) http.Handler {
	return New(Options{Store: adminStore{}, Throttle: memThrottle(4, 0), APIKey: apiKey,
		AuthFailureLimit: limit, Held: fakeHeld{}})
}

func adminRequest(method, path, body string) *http.Request {
	r := localRequest(method, "http://localhost"+path, strings.NewReader(body))
	if method == http.MethodPost {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.Header.Set("Origin", "http://localhost")
		r.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	return r
}

// Every /admin answer, page, stylesheet, redirect, refusal or 404, carries
// the dashboard's CSP and the other headers, through the API's middleware.
func TestAdminHeadersOnEveryResponse(t *testing.T) {
	h := newAdminTestAPI("k", 10)
	for _, tt := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/admin", "", http.StatusSeeOther},
		{"GET", "/admin/held", "", http.StatusSeeOther},
		{"GET", "/admin/messages", "", http.StatusSeeOther},
		{"GET", "/admin/messages/m1", "", http.StatusSeeOther},
		{"GET", "/admin/suppressions", "", http.StatusSeeOther},
		{"GET", "/admin/webhooks", "", http.StatusSeeOther},
		{"GET", "/admin/", "", http.StatusSeeOther},
		{"GET", "/admin/login", "", http.StatusOK},
		{"GET", "/admin/admin.css", "", http.StatusOK},
		{"GET", "/admin/icon.svg", "", http.StatusOK},
		{"POST", "/admin/login", "api_key=wrong", http.StatusOK},
		{"POST", "/admin/login", "api_key=k", http.StatusSeeOther},
		{"POST", "/admin/logout", "", http.StatusSeeOther},
		{"GET", "/admin/nothing", "", http.StatusNotFound},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, adminRequest(tt.method, tt.path, tt.body))
		if rec.Code != tt.status {
			t.Errorf("%s %s = %d, want %d: %s", tt.method, tt.path, rec.Code, tt.status, rec.Body)
		}
		for name, want := range map[string]string{
			"Content-Security-Policy": admin.CSP, "X-Content-Type-Options": "nosniff",
			"Referrer-Policy": "same-origin", "Cache-Control": "no-store",
		} {
			if got := rec.Header().Get(name); got != want {
				t.Errorf("%s %s: %s = %q, want %q", tt.method, tt.path, name, got, want)
			}
		}
	}
	if !strings.Contains(admin.CSP, "frame-ancestors 'none'") || strings.Contains(admin.CSP, "unsafe") {
		t.Errorf("CSP %q", admin.CSP)
	}
}

// The Host allow-list applies to /admin as to /v1.
func TestAdminHostAllowList(t *testing.T) {
	r := adminRequest("GET", "/admin/login", "")
	r.Host = "evil.example"
	rec := httptest.NewRecorder()
	newAdminTestAPI("k", 10).ServeHTTP(rec, r)
	if rec.Code != http.StatusMisdirectedRequest {
		t.Errorf("GET /admin/login for Host evil.example = %d, want 421", rec.Code)
	}
}

// Failed logins and failed API keys are one lockout per client address.
func TestAdminLoginSharesTheAPIKeyLockout(t *testing.T) {
	h := newAdminTestAPI("k", 2)
	serveOne := func(r *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	if rec := serve(h, "GET", "/v1/rate-limit", "", "X-API-Key", "wrong"); rec.Code != http.StatusUnauthorized {
		t.Fatalf("wrong API key = %d, want 401", rec.Code)
	}
	if rec := serveOne(adminRequest("POST", "/admin/login", "api_key=wrong")); rec.Code != http.StatusOK ||
		!strings.Contains(rec.Body.String(), "Wrong key") {
		t.Fatalf("wrong login = %d, want 200 and the form's error", rec.Code)
	}
	rec := serveOne(adminRequest("POST", "/admin/login", "api_key=k"))
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" {
		t.Fatalf("login after two failures = %d (Retry-After %q), want 429 with Retry-After", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := serve(h, "GET", "/v1/rate-limit", "", "X-API-Key", "k"); rec.Code != http.StatusTooManyRequests {
		t.Errorf("API after the lockout = %d, want 429", rec.Code)
	}
}

// The overview shows the global windows, the busiest inbox first, and the
// held mail, read through the API's throttle and store.
func TestAdminOverview(t *testing.T) {
	rec := httptest.NewRecorder()
	newAdminTestAPI("", 0).ServeHTTP(rec, adminRequest("GET", "/admin", ""))
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin = %d: %s", rec.Code, body)
	}
	for _, want := range []string{`id="unit">message<`, `<td class="ratio">0/4</td>`, `<td class="ratio">0/5</td>`,
		`<dd id="held-scheduled">2</dd>`, `<dd id="held-queued">1</dd>`, "waiting 1m3",
		// The charts: unknown delivery counts as failed; the week holds
		// the send of 30 hours ago, the day's reputation does not.
		`<span id="minutes-sent">3</span>`, `<span id="minutes-failed">2</span>`,
		`<span id="hours-sent">43</span>`, `<span id="hours-failed">2</span>`,
		`<tr data-reason="throttled"><th scope="row">Throttled (429)</th><td class="count">2</td>`,
		`<tr data-reason="domain_blocked"><th scope="row">Domain blocked</th><td class="count">0</td>`,
		`<tr data-reason="validation"><th scope="row">Validation</th><td class="count">1</td>`,
		`<span id="reputation-sent">3</span>`, `<td id="bounce-rate">33.33 %</td>`} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	// Equal loads keep the store's order; both inboxes show.
	if q, b := strings.Index(body, `data-inbox="quiet"`), strings.Index(body, `data-inbox="busy"`); q < 0 || b < 0 {
		t.Errorf("overview lacks an inbox (quiet at %d, busy at %d)", q, b)
	}
}

// The three list pages through the API: what the store holds, mapped,
// escaped, and behind the CSP; a webhook's secret never on the page.
func TestAdminListPages(t *testing.T) {
	h := newAdminTestAPI("", 0)
	get := func(path string) string {
		t.Helper()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, adminRequest("GET", path, ""))
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Security-Policy") != admin.CSP {
			t.Fatalf("GET %s = %d, CSP %q; want 200 and the dashboard's CSP:\n%s", path, rec.Code,
				rec.Header().Get("Content-Security-Policy"), rec.Body)
		}
		body := rec.Body.String()
		for _, bad := range []string{"<script>", "<svg"} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: %q unescaped", path, bad)
			}
		}
		return body
	}
	esc := "&lt;script&gt;alert(1)&lt;/script&gt;&#34;&gt;&lt;svg onload=alert(2)&gt;\u202E"
	for path, wants := range map[string][]string{
		"/admin/held": {`data-inbox="busy"`, `data-message="q1"`, `<td class="recipients">3</td>`,
			`<td class="next"><time datetime="2026-11-27T09:00:00Z">`, `<td class="recipients">1</td>`,
			`<td class="scheduled"><time datetime="2026-11-27T10:00:00Z">`, "<bdi>" + esc + "</bdi>"},
		"/admin/suppressions?reason=bounce": {"<bdi>" + esc + "@x.test</bdi>", "<bdi>bouncemanual</bdi>", "<bdi>m1</bdi>", "1–1 of 1"},
		// The last 20 of 25 attempts, newest first: 25 down to 6.
		"/admin/webhooks": {`<bdi class="url">http://127.0.0.1:9/` + esc + "</bdi>", "no: <bdi>failing: " + esc + "</bdi>",
			`<td class="error"><bdi>` + esc + "</bdi>", `<td class="attempt">25</td>`, `<td class="attempt">6</td>`},
	} {
		body := get(path)
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %q:\n%s", path, want, body)
			}
		}
		if path == "/admin/webhooks" {
			if strings.Contains(body, "TOPSECRET") || strings.Contains(body, `<td class="attempt">5</td>`) {
				t.Errorf("webhooks page shows the secret or an attempt older than the last 20:\n%s", body)
			}
			if n := strings.Count(body, `<tr class="delivery">`); n != 20 {
				t.Errorf("webhooks page shows %d attempts, want 20", n)
			}
			if i, j := strings.Index(body, `"attempt">25<`), strings.Index(body, `"attempt">6<`); i > j {
				t.Errorf("attempts oldest first, want newest first")
			}
		}
	}
}

// A wrong key on the login form is logged with its client, and the
// lockout it causes too, as a wrong API key is.
func TestAdminLoginFailureLogged(t *testing.T) {
	var log bytes.Buffer
	h := New(Options{Store: adminStore{}, Throttle: memThrottle(4, 0), APIKey: "k", AuthFailureLimit: 1,
		Logger: slog.New(slog.NewJSONHandler(&log, nil))})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, adminRequest("POST", "/admin/login", "api_key=wrong"))
	for _, want := range []string{`"msg":"admin login rejected"`, `"msg":"too many failed API key attempts; client locked out"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("log lacks %s:\n%s", want, log.String())
		}
	}
}
