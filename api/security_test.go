package api

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/store"
)

func TestSecurityEdges(t *testing.T) {
	ok := fakeSender(func() (*store.Message, error) { return &store.Message{ID: "m", Status: "sent"}, nil })
	h := newTestAPI(ok, "key")
	key := []string{"X-API-Key", "key"}
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		ctype   string
		headers []string
		status  int
		want    string
	}{
		{"405 answers only after the key", "DELETE", "/v1/messages", "", "", nil, 401, `"code":"unauthorized"`},
		{"404 under /v1 answers only after the key", "GET", "/v1/nothing", "", "", nil, 401, `"code":"unauthorized"`},
		{"text/plain body", "POST", "/v1/messages", validSend, "text/plain", key, 415, `"code":"unsupported_media_type"`},
		{"form body", "POST", "/v1/messages", validSend, "application/x-www-form-urlencoded", key, 415, `"code":"unsupported_media_type"`},
		{"no content type", "POST", "/v1/messages", validSend, "", key, 415, `"code":"unsupported_media_type"`},
		{"json with another charset", "POST", "/v1/messages", validSend, "application/json; charset=latin1", key, 415, `"unsupported_media_type"`},
		{"GET with a stray Content-Type", "GET", "/v1/rate-limit", "", "text/plain", key, 200, `"per_minute"`},
		{"json with utf-8", "POST", "/v1/messages", validSend, "application/json; charset=UTF-8", key, 201, `"id":"m"`},
		{"cross-site origin", "POST", "/v1/messages", validSend, "application/json",
			append([]string{"Origin", "https://evil.example"}, key...), 403, `"code":"cross_site_forbidden"`},
		{"null origin", "POST", "/v1/messages", validSend, "application/json",
			append([]string{"Origin", "null"}, key...), 403, `"code":"cross_site_forbidden"`},
		{"cross-site fetch metadata", "POST", "/v1/messages", validSend, "application/json",
			append([]string{"Sec-Fetch-Site", "cross-site"}, key...), 403, `"code":"cross_site_forbidden"`},
		{"allowed origin", "POST", "/v1/messages", validSend, "application/json",
			append([]string{"Origin", "https://app.example", "Sec-Fetch-Site", "cross-site"}, key...), 201, `"id":"m"`},
		{"same origin", "POST", "/v1/messages", validSend, "application/json",
			append([]string{"Origin", "http://localhost"}, key...), 201, `"id":"m"`},
		{"NUL in a path id", "GET", "/v1/inboxes/a%00b", "", "", key, 422, `"loc":["path"]`},
		{"NUL in a query", "GET", "/v1/messages?inbox_id=a%00", "", "", key, 422, `"loc":["query","inbox_id"]`},
		{"headers too large", "GET", "/health", "", "", []string{"X-Big", strings.Repeat("a", 70<<10)}, 431, `"code":"headers_too_large"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := localRequest(tt.method, tt.path, strings.NewReader(tt.body))
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			for i := 0; i+1 < len(tt.headers); i += 2 {
				req.Header.Set(tt.headers[i], tt.headers[i+1])
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("got %d %s, want %d containing %s", rec.Code, rec.Body, tt.status, tt.want)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" || rec.Header().Get("X-Frame-Options") != "DENY" {
				t.Errorf("security headers missing: %v", rec.Header())
			}
		})
	}
}

func TestRequestIDAcceptedOnlyIfSafe(t *testing.T) {
	h := newTestAPI(nil, "")
	for id, kept := range map[string]bool{
		"req-42": true, "0f8fad5b-d9cb-469f-a165-70867728950e": true,
		strings.Repeat("a", 65): false, "a b": false, "a\"b": false, "<script>": false, "é": false,
	} {
		rec := serve(h, "GET", "/health", "", "X-Request-Id", id)
		if got := rec.Header().Get("X-Request-Id") == id; got != kept {
			t.Errorf("X-Request-Id %q kept = %v, want %v", id, got, kept)
		}
	}
}

func TestAuthFailuresThrottled(t *testing.T) {
	clock := clocktest.New(time.Unix(1_700_000_000, 0))
	h := New(Options{Store: fakeStore{}, Sender: fakeSender(nil), Throttle: memThrottle(0, 0),
		APIKey: "key", AuthFailureLimit: 3, Clock: clock,
		AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20})
	get := func(remote, key string) *httptest.ResponseRecorder {
		req := localRequest("GET", "/v1/rate-limit", nil)
		req.RemoteAddr = remote + ":4242"
		req.Header.Set("X-API-Key", key)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for i := range 3 {
		if rec := get("192.0.2.1", "wrong"); rec.Code != 401 {
			t.Fatalf("failure %d: got %d, want 401", i, rec.Code)
		}
	}
	rec := get("192.0.2.1", "key")
	if rec.Code != 429 || !strings.Contains(rec.Body.String(), `"code":"too_many_auth_failures"`) || rec.Header().Get("Retry-After") != "900" {
		t.Fatalf("after the limit, right key: got %d %s Retry-After %q, want 429 and 900", rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if rec := get("192.0.2.2", "key"); rec.Code != 200 {
		t.Fatalf("another address with the right key: got %d, want 200", rec.Code)
	}
	clock.Advance(15*time.Minute + time.Second)
	if rec := get("192.0.2.1", "key"); rec.Code != 200 {
		t.Fatalf("after 15 minutes: got %d, want 200", rec.Code)
	}
}

func TestClientGoneIsNot500(t *testing.T) {
	h := newTestAPI(nil, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := localRequest("POST", "/v1/messages", errReader{ctx.Err()}).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != statusClientClosedRequest {
		t.Fatalf("got %d %s, want 499", rec.Code, rec.Body)
	}
	req = localRequest("POST", "/v1/messages", errReader{errTimeout{}})
	req.Header.Set("Content-Type", "application/json")
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestTimeout {
		t.Fatalf("read timeout: got %d %s, want 408", rec.Code, rec.Body)
	}
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

type errTimeout struct{}

func (errTimeout) Error() string   { return "i/o timeout" }
func (errTimeout) Timeout() bool   { return true }
func (errTimeout) Temporary() bool { return true }

func TestAddressErrorPointsAtItsItem(t *testing.T) {
	h := newTestAPI(nil, "")
	rec := serve(h, "POST", "/v1/messages", `{"inbox_id":"i","to":[7,"g: a@b.test;"],"subject":"s","body":""}`)
	if rec.Code != 422 || !strings.Contains(rec.Body.String(), `"loc":["body","to",1],"msg":"Invalid email address: g: a@b.test; (group syntax is not accepted)"`) {
		t.Fatalf("got %d %s, want a 422 at [body to 1] naming group syntax", rec.Code, rec.Body)
	}
}

// recordLevels is a slog handler that keeps the level of every record.
type recordLevels struct {
	mu     sync.Mutex
	levels []slog.Level
	status []int64
}

func (h *recordLevels) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordLevels) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.levels = append(h.levels, r.Level)
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "status" {
			h.status = append(h.status, a.Value.Int64())
		}
		return true
	})
	return nil
}
func (h *recordLevels) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordLevels) WithGroup(string) slog.Handler      { return h }

// TestCutBodyIsNotAnError sends bodies that never arrive in full to a real
// net/http server: one cut by the client, one cut by the read timeout.
// Each is logged at INFO with a 4xx, and nothing at ERROR.
func TestCutBodyIsNotAnError(t *testing.T) {
	for _, tt := range []struct {
		name   string
		finish func(net.Conn)
		status int64
	}{
		{"client disconnects", func(c net.Conn) { c.Close() }, 400},
		{"read timeout", func(c net.Conn) { time.Sleep(700 * time.Millisecond); c.Close() }, 408},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recordLevels{}
			h := New(Options{Store: fakeStore{}, Sender: fakeSender(nil), Throttle: memThrottle(0, 0),
				Logger: slog.New(rec), AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20})
			srv := httptest.NewUnstartedServer(h)
			srv.Config.ReadTimeout = 300 * time.Millisecond
			srv.Start()
			defer srv.Close()
			c, err := net.Dial("tcp", srv.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"inbox_id\":")
			tt.finish(c)
			deadline := time.Now().Add(5 * time.Second)
			for {
				rec.mu.Lock()
				n := len(rec.status)
				rec.mu.Unlock()
				if n > 0 || time.Now().After(deadline) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.status) != 1 || rec.status[0] != tt.status {
				t.Fatalf("access log statuses = %v, want [%d]", rec.status, tt.status)
			}
			for _, l := range rec.levels {
				if l >= slog.LevelError {
					t.Errorf("logged at %v, want nothing at ERROR", l)
				}
			}
		})
	}
}
