package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// localRequest is httptest.NewRequest addressed to localhost: its default
// Host, example.com, is one the Host check refuses.
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "localhost"
	return r
}

func TestHostPolicy(t *testing.T) {
	p := NewHostPolicy([]string{"api.example.com", "*.corp.example", ".internal.example", "192.0.2.7", "[2001:db8::1]"})
	for _, tt := range []struct {
		host string
		ok   bool
	}{
		{"localhost", true}, {"LOCALHOST:8000", true}, {"localhost.", true}, {"app.localhost:8000", true},
		{"127.0.0.1", true}, {"127.0.0.1:8000", true}, {"127.9.9.9", true}, {"[::1]:8000", true},
		{"[::ffff:127.0.0.1]:80", true}, {"api.example.com", true}, {"API.example.com:443", true},
		{"x.corp.example", true}, {"a.b.corp.example", true}, {"internal.example", true},
		{"x.internal.example:1", true}, {"192.0.2.7:8000", true}, {"[2001:db8:0::1]:8000", true},

		{"", false}, {"rebind.evil.example", false}, {"rebind.evil.example:8000", false},
		{"localhost.evil.example", false}, {"127.0.0.1.nip.io", false}, {"evil-localhost", false},
		{"corp.example", false}, {"xcorp.example", false}, {"example.com", false}, {"api.example.com.evil", false},
		{"192.0.2.8", false}, {"10.0.0.1", false}, {"0.0.0.0", false}, {"[::]:80", false},
		{"2130706433", false}, {"api.example.com@evil.example", false},
	} {
		if got := p.Allows(tt.host); got != tt.ok {
			t.Errorf("Allows(%q) = %v, want %v", tt.host, got, tt.ok)
		}
	}
	if !NewHostPolicy([]string{"*"}).Allows("anything.example") {
		t.Error(`"*" does not allow any host`)
	}
}

// The Host check answers before any handler and any key check, in the
// API's error shape; probes answer on any host.
func TestHostCheck(t *testing.T) {
	h := New(Options{Store: fakeStore{}, Throttle: memThrottle(0, 0), APIKey: "k"})
	for _, tt := range []struct {
		method, path, host string
		want               int
	}{
		{"GET", "/v1/inboxes", "rebind.evil.example", http.StatusMisdirectedRequest},
		{"POST", "/v1/messages", "rebind.evil.example:8000", http.StatusMisdirectedRequest},
		{"GET", "/openapi.json", "evil.example", http.StatusMisdirectedRequest},
		{"OPTIONS", "/v1/messages", "evil.example", http.StatusMisdirectedRequest},
		{"GET", "/health", "10.1.2.3:8000", http.StatusOK},
		{"HEAD", "/health", "evil.example", http.StatusOK},
		{"GET", "/ready", "10.1.2.3:8000", http.StatusServiceUnavailable}, // answered: the fake store is not ready
		{"GET", "/v1/inboxes", "localhost:8000", http.StatusUnauthorized},
	} {
		req := httptest.NewRequest(tt.method, tt.path, nil)
		req.Host = tt.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tt.want {
			t.Errorf("%s %s for %q: %d %s, want %d", tt.method, tt.path, tt.host, rec.Code, rec.Body, tt.want)
		}
		if tt.want == http.StatusMisdirectedRequest && tt.method != "HEAD" &&
			rec.Header().Get("Content-Type") != "application/json" {
			t.Errorf("421 Content-Type = %q, want application/json", rec.Header().Get("Content-Type"))
		}
	}
	// Wrap gives a handler mounted outside the router the same rule.
	wrapped := NewHostPolicy(nil).Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	req := httptest.NewRequest("POST", "/mcp", nil)
	rec := httptest.NewRecorder()
	wrapped.ServeHTTP(rec, req)
	if rec.Code != http.StatusMisdirectedRequest || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("Wrap: %d %q %s, want a 421 in JSON", rec.Code, rec.Header().Get("Content-Type"), rec.Body)
	}
}
