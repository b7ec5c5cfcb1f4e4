package admin

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// login logs in on hs and returns the session cookie.
func login(t *testing.T, hs *harness) *http.Cookie {
	t.Helper()
	rec := hs.do("POST", "/admin/login", url.Values{"api_key": {key}}, nil)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("login = %d, want 303", rec.Code)
	}
	return sessionCookie(t, rec)
}

// served reports whether ck gets the overview from hs (else the login form).
func served(t *testing.T, hs *harness, ck *http.Cookie) bool {
	t.Helper()
	rec := hs.do("GET", "/admin", nil, ck)
	switch {
	case rec.Code == http.StatusOK:
		return true
	case rec.Code == http.StatusSeeOther && rec.Header().Get("Location") == "/admin/login":
		return false
	}
	t.Fatalf("GET /admin = %d %q, want 200 or 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	return false
}

// A logout holds on every server of the database, and after a restart: a
// copy of the cookie is refused by another server sharing the logouts, and
// by a new handler (the same server key and logouts) as after a restart,
// while a session not logged out still works on each.
func TestLogoutHoldsEverywhere(t *testing.T) {
	lo := &fakeLogouts{ids: map[string]time.Time{}}
	a, b := newServer(t, key, lo), newServer(t, key, lo)
	ck, other := login(t, a), login(t, b)
	if !served(t, b, ck) || !served(t, a, other) {
		t.Fatal("a session of one server is refused by the other, before any logout")
	}

	for i := range 2 { // a second logout of the same cookie is no error either
		if rec := a.do("POST", "/admin/logout", url.Values{}, ck); rec.Code != http.StatusSeeOther {
			t.Fatalf("logout #%d = %d, want 303", i+1, rec.Code)
		}
	}
	if len(lo.ids) != 1 {
		t.Errorf("logouts recorded = %v, want the one session", lo.ids)
	}
	for id, exp := range lo.ids {
		if want := a.now.Add(time.Hour).Truncate(time.Second); !exp.Equal(want) {
			t.Errorf("logout of %s expires %v, want %v (the cookie's)", id, exp, want)
		}
	}

	restarted := newServer(t, key, lo)
	for name, hs := range map[string]*harness{"same server": a, "other server": b, "after a restart": restarted} {
		if served(t, hs, ck) {
			t.Errorf("%s: the logged-out cookie still gets the pages", name)
		}
		if !served(t, hs, other) {
			t.Errorf("%s: a session not logged out is refused", name)
		}
	}
	if a.log.Len()+b.log.Len() > 0 {
		t.Errorf("logged %q %q, want nothing", a.log, b.log)
	}
}

// A database that does not answer: a session is refused (the login form,
// never the pages unchecked) and the cause logged; a logout still clears
// the cookie, and logs that it was not recorded.
func TestLogoutsUnavailable(t *testing.T) {
	hs := newHarness(t, key)
	ck := login(t, hs)
	hs.logouts.err = errors.New("connection refused")

	if served(t, hs, ck) {
		t.Error("a session was let in while its logout could not be checked")
	}
	if !strings.Contains(hs.log.String(), "admin session not checked") || !strings.Contains(hs.log.String(), "connection refused") {
		t.Errorf("log = %q, want the failed check and its cause", hs.log)
	}

	hs.log.Reset()
	rec := hs.do("POST", "/admin/logout", url.Values{}, ck)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/admin/login" {
		t.Fatalf("logout = %d %q, want 303 to /admin/login", rec.Code, rec.Header().Get("Location"))
	}
	if gone := sessionCookie(t, rec); gone.MaxAge >= 0 || gone.Value != "" {
		t.Errorf("logout's cookie = %+v, want it cleared", gone)
	}
	if !strings.Contains(hs.log.String(), "admin logout not recorded") || !strings.Contains(hs.log.String(), "connection refused") {
		t.Errorf("log = %q, want the unrecorded logout and its cause", hs.log)
	}
}
