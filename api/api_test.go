package api

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// The end-to-end tests in tests/ cover the API on real databases; these
// cover what only a fake can provoke: unexpected failures and panics.

// fakeStore answers every read but the inbox "i" with not found.
type fakeStore struct{ Store }

// Inbox finds only "i", the sending inbox of validSend.
func (fakeStore) Inbox(_ context.Context, id string) (*store.Inbox, error) {
	if id == "i" {
		return &store.Inbox{ID: "i", EmailAddress: "agent@acme.test"}, nil
	}
	return nil, store.ErrNotFound
}

func (f fakeStore) InboxCopy(ctx context.Context, id string) (*store.Inbox, error) {
	return f.Inbox(ctx, id)
}

func (fakeStore) Ready(context.Context) error { return errors.New("down") }

type fakeSender func() (*store.Message, error)

func (f fakeSender) Send(context.Context, skuld.SendRequest) (skuld.Result, error) {
	m, err := f()
	return skuld.Result{Message: m}, err
}

func (f fakeSender) Cancel(context.Context, string) (*store.Message, error) { return f() }

func (f fakeSender) Reschedule(context.Context, string, time.Time) (*store.Message, error) {
	return f()
}

func (f fakeSender) CloseInbox(context.Context, string) (func(), error) { return func() {}, nil }

// memThrottle is the in-memory throttle with global limits.
func memThrottle(perMinute, perHour int) throttle.Throttle {
	return throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: perMinute, PerHour: perHour},
		throttle.Limits{}), clock.NewSystem())
}

func newTestAPI(sender fakeSender, apiKey string) http.Handler {
	return New(Options{Store: fakeStore{}, Sender: sender, Throttle: memThrottle(5, 0),
		APIKey: apiKey, CORSOrigins: []string{"https://app.example"}, AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2, EmailDomain: "acme.test"})
}

const validSend = `{"inbox_id":"i","to":["a@b.test"],"subject":"s","body":""}`

func serve(h http.Handler, method, path, body string, headers ...string) *httptest.ResponseRecorder {
	req := localRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestUnexpectedFailuresAreGeneric(t *testing.T) {
	tests := []struct {
		name   string
		sender fakeSender
	}{
		{"error", func() (*store.Message, error) { return nil, errors.New("pq: password=hunter2 rejected") }},
		{"panic", func() (*store.Message, error) { panic("hunter2 exploded") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(newTestAPI(tt.sender, ""), "POST", "/v1/messages", validSend, "X-Request-Id", "req-42")
			if rec.Code != http.StatusInternalServerError {
				t.Fatalf("status = %d, want 500; body %s", rec.Code, rec.Body)
			}
			body := rec.Body.String()
			if strings.Contains(body, "hunter2") {
				t.Errorf("500 body leaks the cause: %s", body)
			}
			if !strings.Contains(body, `"request_id":"req-42"`) || rec.Header().Get("X-Request-Id") != "req-42" {
				t.Errorf("500 does not name the request id: %s %v", body, rec.Header())
			}
		})
	}
}

func TestRateLimitedMapping(t *testing.T) {
	refused := fakeSender(func() (*store.Message, error) {
		return nil, &throttle.RateLimitedError{RetryAfter: 12 * time.Second,
			Violations: []throttle.Violation{{Window: throttle.GlobalMinute, Count: 5, Limit: 5, RetryAfter: 12 * time.Second}},
			Snapshot: throttle.Snapshot{Global: throttle.ScopeState{
				PerMinute: throttle.WindowState{Window: throttle.GlobalMinute, Limit: 5, Used: 5, ResetSeconds: 12},
				PerHour:   throttle.WindowState{Window: throttle.GlobalHour}}}}
	})
	rec := serve(newTestAPI(refused, ""), "POST", "/v1/messages", validSend)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "12" {
		t.Fatalf("got %d Retry-After %q, want 429 and 12", rec.Code, rec.Header().Get("Retry-After"))
	}
	want := `{"detail":"Rate limit exceeded: per-minute limit reached (5/5)","code":"rate_limited","retry_after":12,"violated":["per-minute"]}`
	if got := strings.TrimSpace(rec.Body.String()); got != want {
		t.Errorf("body = %s\nwant   %s", got, want)
	}
	if rec.Header().Get("X-RateLimit-Limit") != "5" || rec.Header().Get("RateLimit-Policy") != `"per-minute";q=5;w=60` {
		t.Errorf("rate-limit headers = %v", rec.Header())
	}
}

func TestProtocolEdges(t *testing.T) {
	ok := fakeSender(func() (*store.Message, error) { return &store.Message{ID: "m", Status: "sent"}, nil })
	h := newTestAPI(ok, "key")
	tests := []struct {
		name    string
		method  string
		path    string
		body    string
		headers []string
		status  int
		want    string
	}{
		{"preflight passes auth", "OPTIONS", "/v1/messages", "", []string{"Origin", "https://app.example",
			"Access-Control-Request-Method", "POST"}, http.StatusNoContent, ""},
		{"method not allowed", "PUT", "/health", "", nil, http.StatusMethodNotAllowed, `{"detail":"Method Not Allowed","code":"method_not_allowed"}`},
		{"method not allowed under /v1", "PUT", "/v1/inboxes", "", []string{"X-API-Key", "key"},
			http.StatusMethodNotAllowed, `{"detail":"Method Not Allowed","code":"method_not_allowed"}`},
		{"unknown route under /v1", "GET", "/v1/nothing", "", []string{"X-API-Key", "key"}, http.StatusNotFound, `{"detail":"Not Found","code":"not_found"}`},
		{"no key", "GET", "/v1/inboxes", "", nil, http.StatusUnauthorized, "Missing or invalid API key"},
		{"body too large", "POST", "/v1/messages", strings.Repeat("x", 16<<20), []string{"X-API-Key", "key"},
			http.StatusRequestEntityTooLarge, "Request body too large"},
		{"ready when the database is down", "GET", "/ready", "", nil, http.StatusServiceUnavailable, "not_ready"},
		{"trailing slash", "GET", "/health/", "", nil, http.StatusOK, `{"status":"ok"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := serve(h, tt.method, tt.path, tt.body, tt.headers...)
			if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
				t.Fatalf("got %d %s, want %d containing %s", rec.Code, rec.Body, tt.status, tt.want)
			}
		})
	}
	rec := serve(h, "OPTIONS", "/v1/messages", "", "Origin", "https://app.example", "Access-Control-Request-Method", "POST")
	if rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("preflight headers = %v", rec.Header())
	}
}

// stoppedJobs is a job queue of held mail whose client has stopped.
type stoppedJobs struct{}

func (stoppedJobs) Ready() error { return errors.New("hold: the job queue (River) is stopped") }

// readyStore is a database that answers.
type readyStore struct{ fakeStore }

func (readyStore) Ready(context.Context) error { return nil }

// /ready answers 503 naming held mail when the job queue that dispatches
// it has stopped, and 200 with it running (issue 26).
func TestReadyReportsTheJobQueue(t *testing.T) {
	for _, tt := range []struct {
		jobs   interface{ Ready() error }
		status int
		want   string
	}{
		{stoppedJobs{}, http.StatusServiceUnavailable, `"held_mail":"stopped"`},
		{nil, http.StatusOK, `"status":"ready"`},
	} {
		h := New(Options{Store: readyStore{}, Sender: fakeSender(nil), Throttle: memThrottle(5, 0), Jobs: tt.jobs})
		rec := serve(h, "GET", "/ready", "")
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.want) {
			t.Errorf("jobs %T: %d %s, want %d with %s", tt.jobs, rec.Code, rec.Body, tt.status, tt.want)
		}
	}
}
