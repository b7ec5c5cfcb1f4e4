package tests

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
)

// A dashboard logout holds on the real store (admin_logouts), on both
// databases: a copy of the logged-out cookie is refused by another server
// on the database (PostgreSQL; SQLite takes one server) and by the server
// after a restart, which still lets a new login in.
func TestAdminLogoutHoldsAcrossServersAndRestarts(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		const key = "admin-logout-key"
		s := startDefault(t, driver, func(c *config.Config) {
			c.APIKey = key
			if driver == "postgres" { // several servers on one database share their throttle
				c.ThrottleBackend = "postgres"
			}
		})
		client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		post := func(base, path string, form url.Values, ck *http.Cookie) *http.Response {
			t.Helper()
			req, err := http.NewRequest("POST", base+path, strings.NewReader(form.Encode()))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", base)
			req.Header.Set("Sec-Fetch-Site", "same-origin")
			if ck != nil {
				req.AddCookie(ck)
			}
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			return res
		}
		login := func(base string) *http.Cookie {
			t.Helper()
			res := post(base, "/admin/login", url.Values{"api_key": {key}}, nil)
			for _, c := range res.Cookies() {
				if c.Name == "nornweave_admin" && c.Value != "" {
					return c
				}
			}
			t.Fatalf("login on %s = %d without a session cookie", base, res.StatusCode)
			return nil
		}
		// served reports whether ck gets the overview (else the login form).
		served := func(base string, ck *http.Cookie) bool {
			t.Helper()
			req, _ := http.NewRequest("GET", base+"/admin", nil)
			req.AddCookie(ck)
			res, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusOK && res.Header.Get("Location") != "/admin/login" {
				t.Fatalf("GET /admin on %s = %d %q, want 200 or 303 to /admin/login", base, res.StatusCode, res.Header.Get("Location"))
			}
			return res.StatusCode == http.StatusOK
		}

		ck := login(s.URL)
		var other *server
		if driver == "postgres" {
			other = start(t, s.cfg, s.SMTP)
			if !served(other.URL, ck) {
				t.Fatal("another server on the database refuses a session before its logout")
			}
		}
		if res := post(s.URL, "/admin/logout", url.Values{}, ck); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("logout = %d, want 303", res.StatusCode)
		}
		if served(s.URL, ck) {
			t.Error("the server that logged the session out still serves its cookie")
		}
		if other != nil && served(other.URL, ck) {
			t.Error("another server on the database still serves the logged-out cookie")
		}

		s.Stop()
		again := start(t, s.cfg, s.SMTP)
		if served(again.URL, ck) {
			t.Error("after a restart the logged-out cookie is served again")
		}
		if !served(again.URL, login(again.URL)) {
			t.Error("after a restart a new login is refused")
		}
	})
}
