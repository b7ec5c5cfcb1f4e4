package api

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

func TestClientAddr(t *testing.T) {
	a := &API{Options: Options{TrustedProxies: []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}}}
	for _, tt := range []struct {
		name, peer string
		header     []string
		want, key  string
	}{
		{"no proxy", "192.0.2.1:5000", nil, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer's X-Forwarded-For is ignored", "192.0.2.1:5000", []string{"X-Forwarded-For", "198.51.100.7"}, "192.0.2.1", "192.0.2.1"},
		{"untrusted peer's Forwarded is ignored", "192.0.2.1:5000", []string{"Forwarded", "for=198.51.100.7"}, "192.0.2.1", "192.0.2.1"},
		{"trusted proxy", "10.0.0.1:5000", []string{"X-Forwarded-For", "198.51.100.7"}, "198.51.100.7", "198.51.100.7"},
		{"client's own entries on the left are not read", "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9, 198.51.100.7"}, "198.51.100.7", "198.51.100.7"},
		{"two trusted proxies", "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9, 198.51.100.7, 10.9.9.9"}, "198.51.100.7", "198.51.100.7"},
		{"several header lines", "10.0.0.1:5000", []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", "198.51.100.7:4711"}, "198.51.100.7", "198.51.100.7"},
		{"garbage: the last proxy", "10.0.0.1:5000", []string{"X-Forwarded-For", "unknown"}, "10.0.0.1", "10.0.0.1"},
		{"only proxies", "10.0.0.1:5000", []string{"X-Forwarded-For", "10.0.0.2"}, "10.0.0.2", "10.0.0.2"},
		{"Forwarded", "10.0.0.1:5000", []string{"Forwarded", `for=203.0.113.9, for="[2001:db8::7]:4711";proto=https`}, "2001:db8::7", "2001:db8::/64"},
		{"X-Forwarded-For wins over Forwarded", "10.0.0.1:5000", []string{"Forwarded", "for=203.0.113.9", "X-Forwarded-For", "198.51.100.7"}, "198.51.100.7", "198.51.100.7"},
		{"Forwarded hidden", "10.0.0.1:5000", []string{"Forwarded", "for=_hidden"}, "10.0.0.1", "10.0.0.1"},
		{"IPv6 proxy and client", "[fd00::1]:5000", []string{"X-Forwarded-For", "2001:db8:1:2:3::9"}, "2001:db8:1:2:3::9", "2001:db8:1:2::/64"},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:5000", []string{"X-Forwarded-For", "198.51.100.7"}, "198.51.100.7", "198.51.100.7"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tt.peer
			for i := 0; i+1 < len(tt.header); i += 2 {
				r.Header.Add(tt.header[i], tt.header[i+1])
			}
			if got := a.clientAddr(r).String(); got != tt.want {
				t.Errorf("clientAddr = %s, want %s", got, tt.want)
			}
			if got := a.clientKey(r); got != tt.key {
				t.Errorf("clientKey = %s, want %s", got, tt.key)
			}
		})
	}
}

// Behind a trusted proxy, one client's bad keys lock out that client only,
// and the lockout is logged once, at WARN.
func TestAuthLockoutBehindAProxy(t *testing.T) {
	var logs bytes.Buffer
	h := New(Options{Store: fakeStore{}, Sender: fakeSender(nil),
		Throttle: memThrottle(0, 0),
		APIKey:   "key", AuthFailureLimit: 3, Clock: clocktest.New(time.Unix(1_700_000_000, 0)),
		Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	get := func(peer, xff, key string) int {
		req := localRequest("GET", "/v1/rate-limit", nil)
		req.RemoteAddr = peer
		if xff != "" {
			req.Header.Set("X-Forwarded-For", xff)
		}
		req.Header.Set("X-API-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	for range 3 {
		if got := get("127.0.0.1:1", "198.51.100.7", "wrong"); got != http.StatusUnauthorized {
			t.Fatalf("bad key: %d, want 401", got)
		}
	}
	if got := get("127.0.0.1:1", "198.51.100.7", "key"); got != http.StatusTooManyRequests {
		t.Errorf("the failing client: %d, want 429", got)
	}
	if got := get("127.0.0.1:1", "198.51.100.8", "key"); got != http.StatusOK {
		t.Errorf("another client through the same proxy: %d, want 200", got)
	}
	// A peer that is not trusted cannot pose as another client.
	for range 3 {
		get("192.0.2.1:1", "198.51.100.9", "wrong")
	}
	if got := get("192.0.2.1:1", "198.51.100.10", "key"); got != http.StatusTooManyRequests {
		t.Errorf("untrusted peer with a new X-Forwarded-For: %d, want 429 (its own address counts)", got)
	}
	if got := get("127.0.0.1:1", "198.51.100.9", "key"); got != http.StatusOK {
		t.Errorf("the address the untrusted peer named: %d, want 200 (not locked out by it)", got)
	}
	if n := strings.Count(logs.String(), "client locked out"); n != 2 {
		t.Errorf("%d lockout lines at WARN, want 2 (one per client):\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "client=198.51.100.7") {
		t.Errorf("lockout log = %s, want a WARN naming client=198.51.100.7", logs.String())
	}
}
