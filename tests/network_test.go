package tests

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
)

// The network-facing settings, through the app as the command wires it
// (issue 17, items 10, 13 and 17): a unit test of the API cannot see a
// setting the app forgets to pass on, or a listener it does not use.

// raw sends request as written on a new connection and reads the answer.
func raw(t *testing.T, s *server, request string) (int, http.Header, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, b
}

// codeOf is the code of a JSON error body, or "" if it is not one.
func codeOf(b []byte) string {
	var e struct{ Code string }
	_ = json.Unmarshal(b, &e)
	return e.Code
}

func TestAllowedHostsReachTheAPI(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { c.AllowedHosts = "api.example" })
	for _, tt := range []struct {
		host, path string
		status     int
	}{
		{"api.example", "/v1/inboxes", 200},
		{"localhost", "/v1/inboxes", 200},
		{"evil.example", "/v1/inboxes", 421}, // a DNS-rebound page's requests
		{"evil.example", "/health", 200},     // probes answer on any name
	} {
		status, _, b := raw(t, s, "GET "+tt.path+" HTTP/1.1\r\nHost: "+tt.host+"\r\nConnection: close\r\n\r\n")
		if status != tt.status || (status == 421 && codeOf(b) != "host_not_allowed") {
			t.Errorf("GET %s with Host %s = %d %s, want %d", tt.path, tt.host, status, b, tt.status)
		}
	}
}

// Behind a trusted proxy, the clients it names are locked out one by one:
// without TRUSTED_PROXIES every client is the proxy's address, and one
// client's failures lock all of them out.
func TestTrustedProxiesLockOutEachClient(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) {
		c.APIKey, c.AuthFailureLimit, c.TrustedProxies = "the-key", 3, "127.0.0.0/8"
	})
	from := func(client, key string) response {
		return s.do(t, "GET", "/v1/inboxes", nil, "X-Forwarded-For", client, "X-API-Key", key)
	}
	for range 3 {
		mustStatus(t, from("203.0.113.1", "wrong"), http.StatusUnauthorized)
	}
	if r := from("203.0.113.1", "the-key"); r.Status != http.StatusTooManyRequests {
		t.Errorf("the client that failed 3 times: %d, want 429", r.Status)
	}
	mustStatus(t, from("203.0.113.2", "the-key"), http.StatusOK)
	mustStatus(t, from("203.0.113.2", "wrong"), http.StatusUnauthorized)
}

// net/http's own answers, to requests no handler sees, are JSON too.
func TestMalformedRequestsGetJSON(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", nil)
	for _, tt := range []struct {
		request string
		status  int
		code    string
	}{
		{"GET /v1/messages/%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request"},
		{"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
	} {
		status, h, b := raw(t, s, tt.request)
		if status != tt.status || h.Get("Content-Type") != "application/json" || codeOf(b) != tt.code {
			t.Errorf("%q = %d %q %s, want %d with code %s in JSON", tt.request, status, h.Get("Content-Type"), b,
				tt.status, tt.code)
		}
	}
}
