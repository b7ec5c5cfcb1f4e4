package admin

import (
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
)

// The windows refresh: the overview wraps them in the div htmx polls, and
// /admin/windows answers that div alone, so the swap keeps polling.
func TestWindowsFragment(t *testing.T) {
	const wrapper = `<div id="throttle" hx-get="/admin/windows" hx-trigger="every 2s" hx-swap="outerHTML">`
	hs := newHarness(t, key)
	hs.ov.Activity = activity()
	hs.ov.Inboxes = []InboxWindows{{ID: "in-1", Address: "a@acme.test", Name: hostile, Windows: []Window{{Name: "per_minute", Limit: 2, Used: 1}}}}
	if rec := hs.do("GET", "/admin/windows", nil, nil); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
		t.Errorf("GET /admin/windows without a session = %d %q, want 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	}
	// From htmx, a 303 would be followed and the login form swapped in.
	for _, path := range []string{"/admin/windows", "/admin"} {
		rec := hs.do("GET", path, nil, nil, "HX-Request", "true")
		if rec.Code != http.StatusUnauthorized || rec.Header().Get("HX-Redirect") != "/admin/login" || rec.Body.Len() != 0 {
			t.Errorf("GET %s from htmx without a session = %d HX-Redirect %q, %q; want 401 to /admin/login, no body",
				path, rec.Code, rec.Header().Get("HX-Redirect"), rec.Body)
		}
	}
	ck := sessionCookie(t, hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil))
	page := hs.do("GET", "/admin", nil, ck).Body.String()
	if n := strings.Count(page, wrapper); n != 1 {
		t.Errorf("the overview has %d refreshing wrappers, want 1:\n%s", n, page)
	}
	rec := hs.do("GET", "/admin/windows", nil, ck, "HX-Request", "true")
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.HasPrefix(body, wrapper) || !strings.HasSuffix(body, "</div>") {
		t.Fatalf("GET /admin/windows = %d, want 200 and the wrapper alone:\n%s", rec.Code, body)
	}
	mustContain(t, body, `<section id="global">`, `<section id="inboxes">`, `<td class="ratio">3/4</td>`,
		`<td class="ratio">1/2</td>`, `<bdi>`+hostileEscaped+`</bdi>`, `<time id="windows-at" datetime="2026-11-27T08:00:00Z">`)
	mustNotContain(t, body, "<html", "<h1>", `id="activity"`, "<script", "<svg onload")
	// The same windows, in the same markup, as in the page.
	if !strings.Contains(page, body) {
		t.Errorf("the fragment is not the page's windows:\n%s", body)
	}
}

func TestCSP(t *testing.T) {
	const want = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	h := http.Header{}
	SetHeaders(h)
	if got := h.Get("Content-Security-Policy"); got != want {
		t.Errorf("CSP = %q, want %q", got, want)
	}
}

// The served htmx is the vendored one, as JavaScript, and like admin.css
// needs no session: it is public code.
func TestHtmxServed(t *testing.T) {
	hs := newHarness(t, key)
	rec := hs.do("GET", "/admin/htmx.min.js", nil, nil)
	version, err := os.ReadFile("htmx/VERSION")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("GET /admin/htmx.min.js = %d %q, want 200 text/javascript", rec.Code, rec.Header().Get("Content-Type"))
	}
	if v := `version:"` + strings.TrimSpace(string(version)) + `"`; !strings.Contains(rec.Body.String(), v) || rec.Body.Len() < 10000 {
		t.Errorf("served %d bytes without %s", rec.Body.Len(), v)
	}
}
