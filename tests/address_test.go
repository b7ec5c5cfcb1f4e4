package tests

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TestCanonicalAddressIsWhatIsSent checks that the address the filter
// allowed is exactly the one the envelope, the headers and the stored row
// use, and that a recipient listed many times is one recipient.
func TestCanonicalAddressIsWhatIsSent(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.OutboundDomainBlocklist = `evil\.com` })
		inbox := s.createInbox(t, "support")
		r := s.do(t, "POST", "/v1/messages", map[string]any{
			"inbox_id": inbox,
			"to":       []string{"Ann <ann@ ＯＫ.test>", "ANN@ok.test", "b@bücher.example (work)"},
			"cc":       []string{"ann@OK.TEST", "c@ok.test"},
			"bcc":      []string{"C@ok.test", "b@BÜCHER.example", "d@ok。test"},
			"reply_to": []string{"r@ok.test", "R@ok.test"},
			"subject":  "s", "body": "b",
		})
		mustStatus(t, r, http.StatusCreated)
		s.SMTP.WaitForCount(t, 1)
		got := s.SMTP.Messages()[0]
		wantRcpt := []string{"ann@ok.test", "b@xn--bcher-kva.example", "c@ok.test", "d@ok.test"}
		if !slices.Equal(got.To, wantRcpt) {
			t.Errorf("envelope = %v, want %v (canonical, each once)", got.To, wantRcpt)
		}
		for header, want := range map[string]string{
			"To": `"Ann" <ann@ok.test>, "work" <b@xn--bcher-kva.example>`, "Cc": "<c@ok.test>", "Reply-To": "<r@ok.test>",
		} {
			if h := got.Header.Get(header); h != want {
				t.Errorf("%s = %q, want %q", header, h, want)
			}
		}
		if got.Header.Get("Bcc") != "" {
			t.Errorf("Bcc header = %q, want none", got.Header.Get("Bcc"))
		}
		row := s.do(t, "GET", "/v1/messages/"+r.JSON(t)["id"].(string), nil).JSON(t)
		for field, want := range map[string][]string{
			"to_addresses":  {`"Ann" <ann@ok.test>`, `"work" <b@xn--bcher-kva.example>`},
			"cc_addresses":  {"c@ok.test"},
			"bcc_addresses": {"d@ok.test"},
		} {
			var have []string
			for _, a := range row[field].([]any) {
				have = append(have, a.(string))
			}
			if !slices.Equal(have, want) {
				t.Errorf("%s = %v, want %v", field, have, want)
			}
		}
	})
}

// TestSendFailureHidesTheRelay checks that a client learns what kind of
// failure a send was, not the relay's address.
func TestSendFailureHidesTheRelay(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().(*net.TCPAddr)
	l.Close() // nothing listens there now
	mx := smtptest.Start(t)
	cfg := baseConfig(t, "sqlite", mx)
	cfg.SMTPPort = addr.Port
	s := start(t, cfg, mx)
	inbox := s.createInbox(t, "support")
	r := s.send(t, inbox, "bob@customer.test")
	mustStatus(t, r, http.StatusCreated)
	e, _ := r.JSON(t)["error"].(string)
	if r.JSON(t)["status"] != "failed" || e == "" || strings.Contains(e, "127.0.0.1") || strings.Contains(e, addr.String()) {
		t.Fatalf("error = %q, want a failure that does not name the relay", e)
	}
	if !strings.Contains(e, "cannot connect to the SMTP server") {
		t.Errorf("error = %q, want it to say the server could not be reached", e)
	}
}

// TestAuthFailuresAreThrottled checks the 401 throttle end to end.
func TestAuthFailuresAreThrottled(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { c.APIKey, c.AuthFailureLimit = "k", 3 })
	for range 3 {
		mustStatus(t, s.do(t, "GET", "/v1/inboxes", nil, "X-API-Key", "nope"), http.StatusUnauthorized)
	}
	r := s.do(t, "GET", "/v1/inboxes", nil, "X-API-Key", "k")
	mustStatus(t, r, http.StatusTooManyRequests)
	if r.JSON(t)["code"] != "too_many_auth_failures" || r.Header.Get("Retry-After") == "" {
		t.Errorf("429 = %s %v, want code too_many_auth_failures and Retry-After", r.Body, r.Header)
	}
	// /health needs no key and is not throttled.
	mustStatus(t, s.do(t, "GET", "/health", nil), http.StatusOK)
}
