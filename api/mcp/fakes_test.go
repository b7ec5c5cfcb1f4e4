package mcp

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// The fakes of api's own tests that these need, for what only a fake can
// provoke: failures of the pipeline itself.

// fakeStore answers every read but the inbox "i" with not found.
type fakeStore struct{ api.Store }

// Inbox finds only "i", the sending inbox of the tests' sends.
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

// withMCP sets o.MCP to serve this package's server, and returns where
// that server will be once api.New has built it.
func withMCP(o *api.Options) **Server {
	var s *Server
	o.MCP = func(a *api.API) echo.HandlerFunc {
		s = New(a)
		return s.Handler()
	}
	return &s
}

// newTestAPI is an API on fakes, with its MCP server.
func newTestAPI(sender fakeSender, apiKey string) (*api.Server, *Server) {
	o := api.Options{Store: fakeStore{}, Sender: sender, Throttle: memThrottle(5, 0),
		APIKey: apiKey, CORSOrigins: []string{"https://app.example"}, AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2, EmailDomain: "acme.test"}
	s := withMCP(&o)
	srv := api.New(o)
	return srv, *s
}

// localRequest is a request addressed to localhost, which the API's Host
// rules accept.
func localRequest(method, target string, body io.Reader) *http.Request {
	r := httptest.NewRequest(method, target, body)
	r.Host = "localhost"
	return r
}

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

// nopMetrics reports nothing.
type nopMetrics struct{}

func (nopMetrics) Request(string, string, int, time.Duration) {}
func (nopMetrics) Replayed()                                  {}
func (nopMetrics) ToolCall(string, string)                    {}
func (nopMetrics) WebhookRefused(string, string)              {}
func (nopMetrics) Suppressed(string)                          {}
func (nopMetrics) Handler() http.Handler                      { return http.NotFoundHandler() }
