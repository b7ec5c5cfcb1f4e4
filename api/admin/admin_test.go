package admin

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
)

const key = "the-api-key"

// fakeLockout is the API's lockout as the dashboard sees it: limit
// failures, then blocked for a minute.
type fakeLockout struct {
	limit, failures int
}

func (f *fakeLockout) blocked(*http.Request) (bool, time.Duration) {
	return f.failures >= f.limit, 61500 * time.Millisecond
}
func (f *fakeLockout) failed(*http.Request) { f.failures++ }

// fakeLogouts is admin_logouts as the store keeps it; err, when set, is
// a database that does not answer.
type fakeLogouts struct {
	mu  sync.Mutex
	ids map[string]time.Time
	err error
}

func (f *fakeLogouts) revoke(_ context.Context, id string, exp time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if _, ok := f.ids[id]; !ok {
		f.ids[id] = exp
	}
	return nil
}

func (f *fakeLogouts) revoked(_ context.Context, id string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.ids[id]
	return ok, f.err
}

type harness struct {
	h    *Handler
	e    *echo.Echo
	now  time.Time
	lock *fakeLockout
	// logouts is the database's admin_logouts, which servers share.
	logouts *fakeLogouts
	log     *strings.Builder
	ov      Overview
	// What the list pages read, and what they were last asked.
	held  []HeldMessage
	sups  []Suppression
	hooks []WebhookEndpoint
	msgs  []MessageRow
	one   map[string]MessageDetail
	asked []any
}

// newHarness serves the dashboard's routes as api/routes.go does, on a
// database of its own.
func newHarness(t *testing.T, apiKey string) *harness {
	t.Helper()
	return newServer(t, apiKey, &fakeLogouts{ids: map[string]time.Time{}})
}

// newServer is one server on a database whose logouts are lo: those of
// the same lo share them, as servers on one database, or one server
// before and after a restart, do.
func newServer(t *testing.T, apiKey string, lo *fakeLogouts) *harness {
	t.Helper()
	hs := &harness{now: time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC), lock: &fakeLockout{limit: 3},
		logouts: lo, log: &strings.Builder{}}
	hs.ov = Overview{Unit: "message", Global: []Window{{Name: "per_minute", Limit: 4, Used: 3, InFlight: 1, ResetSeconds: 42}}}
	hs.h = New(Options{APIKey: apiKey, ServerKey: []byte("0123456789abcdef0123456789abcdef"),
		SessionTTL: time.Hour, Now: func() time.Time { return hs.now },
		Blocked: hs.lock.blocked, Failed: hs.lock.failed,
		Overview: func(context.Context) (Overview, error) { return hs.ov, nil },
		Held: func(_ context.Context, limit, offset int) ([]HeldMessage, error) {
			hs.asked = []any{limit, offset}
			return window(hs.held, limit, offset), nil
		},
		Suppressions: func(_ context.Context, reason string, limit, offset int) ([]Suppression, int64, error) {
			hs.asked = []any{reason, limit, offset}
			return window(hs.sups, limit, offset), int64(len(hs.sups)), nil
		},
		Webhooks: func(context.Context) ([]WebhookEndpoint, error) { return hs.hooks, nil },
		Messages: func(_ context.Context, f MessageFilter) ([]MessageRow, error) {
			hs.asked = []any{f}
			return window(hs.msgs, f.Limit, f.Offset), nil
		},
		Message: func(_ context.Context, id string) (MessageDetail, error) {
			m, ok := hs.one[id]
			if !ok {
				return m, ErrNotFound
			}
			return m, nil
		},
		Revoke: lo.revoke, Revoked: lo.revoked,
		Logger: slog.New(slog.NewTextHandler(hs.log, nil))})
	e := echo.New()
	hs.h.Register(e)
	hs.e = e
	return hs
}

// do sends a request from a page of this site (Origin and Sec-Fetch-Site
// as a browser sets them on a same-origin form POST) unless headers say
// otherwise.
func (hs *harness) do(method, path string, form url.Values, cookie *http.Cookie, headers ...string) *httptest.ResponseRecorder {
	var body *strings.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	} else {
		body = strings.NewReader("")
	}
	req := httptest.NewRequest(method, "http://admin.test"+path, body)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", "http://admin.test")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] == "" {
			req.Header.Del(headers[i])
		} else {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	rec := httptest.NewRecorder()
	hs.e.ServeHTTP(rec, req)
	return rec
}

func sessionCookie(t *testing.T, rec *httptest.ResponseRecorder) *http.Cookie {
	t.Helper()
	for _, c := range rec.Result().Cookies() {
		if c.Name == cookieName {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", cookieName, rec.Header())
	return nil
}

func TestSessionSignAndCheck(t *testing.T) {
	now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
	s := newSessions([]byte("server key"), key)
	v, err := s.issue(now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.check(v, now); err != nil {
		t.Fatalf("check(fresh) = %v, want nil", err)
	}
	payload, mac, _ := strings.Cut(v, ".")
	flip := func(s string, i int) string {
		b := []byte(s)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		return string(b)
	}
	later, _ := newSessions([]byte("server key"), key).issue(now.Add(48 * time.Hour))
	laterPayload, _, _ := strings.Cut(later, ".")
	for _, tt := range []struct {
		name string
		v    string
		at   time.Time
		want error
	}{
		{"payload tampered", flip(payload, 3) + "." + mac, now, errBadMAC},
		{"mac tampered", payload + "." + flip(mac, 5), now, errBadMAC},
		{"expiry swapped for a later one", laterPayload + "." + mac, now, errBadMAC},
		{"other server key", mustIssue(t, newSessions([]byte("another"), key), now.Add(time.Hour)), now, errBadMAC},
		{"other API key", mustIssue(t, newSessions([]byte("server key"), "old key"), now.Add(time.Hour)), now, errBadMAC},
		{"no dot", payload, now, errMalformed},
		{"empty", "", now, errMalformed},
		{"not base64", "!!!." + mac, now, errMalformed},
		{"expired", v, now.Add(time.Hour), errExpired},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, _, err := s.check(tt.v, tt.at); err != tt.want {
				t.Errorf("check = %v, want %v", err, tt.want)
			}
		})
	}
}

func mustIssue(t *testing.T, s *sessions, exp time.Time) string {
	t.Helper()
	v, err := s.issue(exp)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLoginLogout(t *testing.T) {
	hs := newHarness(t, key)
	if rec := hs.do("GET", "/admin", nil, nil); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
		t.Fatalf("GET /admin without a session = %d %q, want 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	}
	rec := hs.do("GET", "/admin/login", nil, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `name="api_key"`) {
		t.Fatalf("GET /admin/login = %d, want 200 and the form:\n%s", rec.Code, rec.Body)
	}

	rec = hs.do("POST", "/admin/login", url.Values{"api_key": {"wrong"}}, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Wrong key") {
		t.Fatalf("wrong key = %d, want 200 and the form with its error:\n%s", rec.Code, rec.Body)
	}
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("wrong key set cookies %v", rec.Result().Cookies())
	}
	if hs.lock.failures != 1 {
		t.Errorf("failures counted = %d, want 1", hs.lock.failures)
	}

	rec = hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin" {
		t.Fatalf("good key = %d %q, want 303 to /admin", rec.Code, rec.Header().Get("Location"))
	}
	ck := sessionCookie(t, rec)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/admin" || ck.Secure {
		t.Errorf("cookie = %+v, want HttpOnly, SameSite=Strict, Path=/admin, not Secure over plain HTTP", ck)
	}
	if want := hs.now.Add(time.Hour); !ck.Expires.Equal(want) {
		t.Errorf("cookie expires %v, want %v (the session TTL)", ck.Expires, want)
	}
	if strings.Contains(ck.Value, key) {
		t.Errorf("cookie %q holds the API key", ck.Value)
	}
	if rec := hs.do("GET", "/admin", nil, ck); rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "3/4") {
		t.Fatalf("GET /admin with the session = %d, want 200 with 3/4:\n%s", rec.Code, rec.Body)
	}

	hs.now = hs.now.Add(time.Hour)
	if rec := hs.do("GET", "/admin", nil, ck); rec.Code != http.StatusSeeOther {
		t.Errorf("GET /admin with an expired session = %d, want 303", rec.Code)
	}
	hs.now = hs.now.Add(-time.Hour)

	rec = hs.do("POST", "/admin/logout", url.Values{}, ck)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
		t.Fatalf("logout = %d %q, want 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	}
	if gone := sessionCookie(t, rec); gone.MaxAge >= 0 || gone.Value != "" || gone.Path != "/admin" {
		t.Errorf("logout's cookie = %+v, want it cleared (Max-Age<0) on Path=/admin", gone)
	}
	// A copy of the cookie kept by whoever took it no longer works.
	if rec := hs.do("GET", "/admin", nil, ck); rec.Code != http.StatusSeeOther {
		t.Errorf("GET /admin with a logged-out session = %d, want 303", rec.Code)
	}
}

func TestSecureCookieOverTLS(t *testing.T) {
	hs := newHarness(t, key)
	req := httptest.NewRequest("POST", "https://admin.test/admin/login", strings.NewReader("api_key="+key))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://admin.test")
	req.TLS = &tls.ConnectionState{}
	rec := httptest.NewRecorder()
	hs.e.ServeHTTP(rec, req)
	if ck := sessionCookie(t, rec); !ck.Secure {
		t.Errorf("cookie over TLS = %+v, want Secure", ck)
	}
}

// After the lockout's limit of wrong keys, even the right key gets 429
// with Retry-After, and no session.
func TestLoginLockout(t *testing.T) {
	hs := newHarness(t, key)
	for i := range hs.lock.limit {
		if rec := hs.do("POST", "/admin/login", url.Values{"api_key": {"guess"}}, nil); rec.Code != http.StatusOK || hs.lock.failures != i+1 {
			t.Fatalf("guess %d = %d, %d failures counted; want 200, %d", i+1, rec.Code, hs.lock.failures, i+1)
		}
	}
	rec := hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "62" {
		t.Fatalf("locked out = %d Retry-After %q, want 429 and 62", rec.Code, rec.Header().Get("Retry-After"))
	}
	if len(rec.Result().Cookies()) != 0 {
		t.Errorf("a locked-out login set cookies %v", rec.Result().Cookies())
	}
}

// The cross-site rule of sameOrigin, on login and logout.
func TestCrossSitePostRefused(t *testing.T) {
	for _, tt := range []struct {
		name    string
		headers []string
		want    int
	}{
		{"same origin", nil, http.StatusSeeOther},
		{"other origin", []string{"Origin", "https://evil.test", "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"other origin, no fetch metadata", []string{"Origin", "https://evil.test", "Sec-Fetch-Site", ""}, http.StatusForbidden},
		{"null origin", []string{"Origin", "null", "Sec-Fetch-Site", ""}, http.StatusForbidden},
		{"same-site sibling", []string{"Origin", "http://other.admin.test", "Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{"matching origin but cross-site fetch", []string{"Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{"no origin, same-origin fetch", []string{"Origin", ""}, http.StatusSeeOther},
		{"no origin nor fetch metadata, own referer", []string{"Origin", "", "Sec-Fetch-Site", "", "Referer", "http://admin.test/admin/login"}, http.StatusSeeOther},
		{"no origin nor fetch metadata, foreign referer", []string{"Origin", "", "Sec-Fetch-Site", "", "Referer", "https://evil.test/"}, http.StatusForbidden},
		{"nothing at all", []string{"Origin", "", "Sec-Fetch-Site", ""}, http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/admin/login", "/admin/logout"} {
				hs := newHarness(t, key)
				rec := hs.do("POST", path, url.Values{"api_key": {key}}, nil, tt.headers...)
				if rec.Code != tt.want {
					t.Errorf("POST %s = %d, want %d", path, rec.Code, tt.want)
				}
				if tt.want == http.StatusForbidden && len(rec.Result().Cookies()) != 0 {
					t.Errorf("POST %s refused but set cookies %v", path, rec.Result().Cookies())
				}
			}
		})
	}
}

func TestOpenWithoutAPIKey(t *testing.T) {
	hs := newHarness(t, "")
	rec := hs.do("GET", "/admin", nil, nil)
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "3/4") {
		t.Fatalf("GET /admin = %d, want 200 with 3/4:\n%s", rec.Code, rec.Body)
	}
	if strings.Contains(rec.Body.String(), "/admin/logout") {
		t.Errorf("open dashboard offers a logout")
	}
	if rec := hs.do("GET", "/admin/login", nil, nil); rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin" {
		t.Errorf("GET /admin/login = %d %q, want 303 to /admin", rec.Code, rec.Header().Get("Location"))
	}
}

// Names and addresses are the users': whatever they hold renders as text,
// and a bidi override is isolated in <bdi>.
func TestHostileNamesRenderAsText(t *testing.T) {
	hs := newHarness(t, "")
	hs.ov.Inboxes = []InboxWindows{{ID: `i"><script>x</script>`, Address: `"><svg onload=alert(1)>@acme.test`,
		Name:    "<script>alert(1)</script>\u202Egnp.exe",
		Windows: []Window{{Name: "per_minute", Limit: 2, Used: 2}, {Name: "per_hour", Used: 2}}}}
	body := hs.do("GET", "/admin", nil, nil).Body.String()
	for _, bad := range []string{"<script>", "<svg onload"} {
		if strings.Contains(body, bad) {
			t.Errorf("page contains %q unescaped:\n%s", bad, body)
		}
	}
	for _, want := range []string{
		"<bdi>&lt;script&gt;alert(1)&lt;/script&gt;\u202Egnp.exe</bdi>",
		"<bdi>&#34;&gt;&lt;svg onload=alert(1)&gt;@acme.test</bdi>",
		`data-inbox="i&#34;&gt;&lt;script&gt;x&lt;/script&gt;"`,
		"2/2", "2/∞",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
}

func TestBar(t *testing.T) {
	for _, tt := range []struct {
		w    Window
		want Bar
	}{
		{Window{Limit: 4, Used: 3, InFlight: 1}, Bar{Used: 150, InFlight: 50, InFlightX: 150, FreeX: 200}},
		{Window{Limit: 4}, Bar{Free: 200}},
		{Window{Limit: 1000, Used: 1}, Bar{Used: 1, InFlightX: 1, FreeX: 1, Free: 199}},
		{Window{Limit: 2, Used: 3, InFlight: 1}, Bar{Used: 200, InFlightX: 200, FreeX: 200}},
		{Window{Used: 5}, Bar{Free: 200, Unlimited: true}},
	} {
		if got := bar(tt.w); got != tt.want {
			t.Errorf("bar(%+v) = %+v, want %+v", tt.w, got, tt.want)
		}
	}
}
