package api

import (
	"context"
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
func (adminStore) BusiestInboxes(context.Context, time.Time, int) ([]store.Inbox, error) {
	return nil, nil
}

type fakeHeld struct{}

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
		`<dd id="held-scheduled">2</dd>`, `<dd id="held-queued">1</dd>`, "waiting 1m3"} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q:\n%s", want, body)
		}
	}
	// Equal loads keep the store's order; both inboxes show.
	if q, b := strings.Index(body, `data-inbox="quiet"`), strings.Index(body, `data-inbox="busy"`); q < 0 || b < 0 {
		t.Errorf("overview lacks an inbox (quiet at %d, busy at %d)", q, b)
	}
}
