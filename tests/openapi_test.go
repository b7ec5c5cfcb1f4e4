package tests

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/config"
)

// The OpenAPI document, loaded once and checked against the 3.1 schema
// rules; every response `do` receives is validated against it.
var (
	specOnce   sync.Once
	specRouter routers.Router
	specErr    error
)

func openAPIRouter(t testing.TB) routers.Router {
	t.Helper()
	specOnce.Do(func() {
		// /docs and its files are HTML, scripts, styles, an image and
		// licenses, which the validator has no decoder for: as strings.
		for _, ct := range []string{"text/html", "text/javascript", "text/css", "image/png"} {
			openapi3filter.RegisterBodyDecoder(ct, func(r io.Reader, _ http.Header, _ *openapi3.SchemaRef,
				_ openapi3filter.EncodingFn) (any, error) {
				b, err := io.ReadAll(r)
				return string(b), err
			})
		}
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromData(api.OpenAPIDocument)
		if err != nil {
			specErr = err
			return
		}
		if specErr = doc.Validate(context.Background()); specErr != nil {
			return
		}
		// The document's one server is "/", relative to wherever it is
		// served; without servers the legacy router matches paths on any
		// host, which is what a test server on a random port needs.
		doc.Servers = nil
		specRouter, specErr = legacy.NewRouter(doc)
	})
	if specErr != nil {
		t.Fatalf("openapi.json: %v", specErr)
	}
	return specRouter
}

// checkResponse validates a response against the document: its status must
// be documented for the operation, and its body and headers must match.
// Requests to routes the document does not have (404 probes of unknown
// paths, 405s) are skipped: the parity test in api/ covers the routes.
func checkResponse(t testing.TB, req *http.Request, status int, header http.Header, body []byte) {
	t.Helper()
	if req.Method == http.MethodOptions || status == http.StatusMethodNotAllowed {
		return
	}
	// The document's paths have no trailing slash; the server tolerates one.
	if p := req.URL.Path; len(p) > 1 && strings.HasSuffix(p, "/") {
		req = req.Clone(req.Context())
		req.URL.Path = strings.TrimSuffix(p, "/")
	}
	route, params, err := openAPIRouter(t).FindRoute(req)
	var re *routers.RouteError // the legacy router makes new ones: compare reasons
	switch {
	case errors.As(err, &re) && (re.Reason == routers.ErrPathNotFound.Error() || re.Reason == routers.ErrMethodNotAllowed.Error()):
		// A probe of a path or method the API does not have is answered
		// 404 or 405; anything else means the router missed a real route
		// (and the validation would be skipped).
		if status != http.StatusNotFound {
			t.Errorf("%s %s → %d, but openapi.json has no such operation (%v)", req.Method, req.URL.Path, status, err)
		}
		return
	case err != nil:
		// Anything else would skip the validation silently.
		t.Errorf("%s %s: no route in openapi.json: %v", req.Method, req.URL, err)
		return
	}
	key := bodyKey(req.Method, route, status, header, body)
	_, bodyValid := validBodies.Load(key)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if req.Method == http.MethodHead || bodyValid {
		in.Options.ExcludeResponseBody = true
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s %s → %d does not match openapi.json: %v\nbody: %s", req.Method, req.URL.Path, status, err, body)
		return
	}
	validBodies.Store(key, struct{}{})
}

// validBodies holds the keys (bodyKey) of the bodies found to match the
// document. The validator compiles the operation's JSON schema anew for
// every body, which under -race cost a polling test most of its CPU
// (BENCHMARKS.md, section 36); a test that polls receives the same body
// many times, and the same body validates the same way, so its body is
// validated once. Headers (a request id differs on every answer) are
// validated every time.
var validBodies sync.Map

// bodyKey is a digest of what ValidateResponse reads to validate a body:
// the operation, the status, the Content-Type and the body.
func bodyKey(method string, route *routers.Route, status int, header http.Header, body []byte) [sha256.Size]byte {
	h := sha256.New()
	fmt.Fprintf(h, "%s %s %d %q\x00", method, route.Path, status, header.Values("Content-Type"))
	h.Write(body)
	return [sha256.Size]byte(h.Sum(nil))
}

// Each route's success and its main error, validated against the document
// (do validates every response; this makes sure each route is met).
func TestEveryRouteConformsToOpenAPI(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) {
		c.APIKey, c.SendRateLimitPerMinute = "key", 1
	})
	k := []string{"X-API-Key", "key"}
	mustStatus(t, s.do(t, "GET", "/health", nil), 200)
	mustStatus(t, s.do(t, "HEAD", "/health", nil), 200)
	mustStatus(t, s.do(t, "GET", "/ready", nil), 200)
	mustStatus(t, s.do(t, "HEAD", "/ready", nil), 200)
	mustStatus(t, s.do(t, "GET", "/metrics", nil), 200)
	mustStatus(t, s.do(t, "GET", "/openapi.json", nil), 200)
	mustStatus(t, s.do(t, "GET", "/docs", nil), 200)
	mustStatus(t, s.do(t, "HEAD", "/docs", nil), 200)
	for _, f := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "init.js", "favicon-32x32.png", "LICENSE"} {
		mustStatus(t, s.do(t, "GET", "/docs/"+f, nil), 200)
	}
	mustStatus(t, s.do(t, "HEAD", "/docs/swagger-ui.css", nil), 200)
	mustStatus(t, s.do(t, "GET", "/docs/nothing.js", nil), 404)

	mustStatus(t, s.do(t, "GET", "/v1/inboxes", nil), 401)
	inbox := s.createInbox(t, "support", k...)
	mustStatus(t, s.do(t, "POST", "/v1/inboxes", map[string]any{"name": "S", "email_username": "support"}, k...), 409)
	mustStatus(t, s.do(t, "POST", "/v1/inboxes", map[string]any{"name": ""}, k...), 422)
	mustStatus(t, s.do(t, "GET", "/v1/inboxes", nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/inboxes/"+inbox, nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/inboxes/nonexistent-inbox-id", nil, k...), 404)

	send := map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"}, "subject": "Hi", "body": "**x**",
		"cc": []string{"c@customer.test"}, "reply_to": []string{"help@acme.test"}, "html": "<p>x</p>",
		"attachments": []map[string]any{{"filename": "a.txt", "content_type": "text/plain", "content_base64": "aGk="}}}
	r := s.do(t, "POST", "/v1/messages", send, append(k, "Idempotency-Key", "k1")...)
	mustStatus(t, r, 201)
	msg := r.JSON(t)
	r = s.do(t, "POST", "/v1/messages", send, append(k, "Idempotency-Key", "k1")...)
	if mustStatus(t, r, 201); r.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("replay lacks Idempotent-Replayed")
	}
	mustStatus(t, s.do(t, "POST", "/v1/messages", send, k...), 429)
	mustStatus(t, s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox}, k...), 422)
	mustStatus(t, s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": "nope", "to": []string{"a@b.test"},
		"subject": "s", "body": ""}, k...), 404)

	thread := msg["thread_id"].(string)
	mustStatus(t, s.do(t, "GET", "/v1/threads?inbox_id="+inbox, nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/threads", nil, k...), 422)
	mustStatus(t, s.do(t, "GET", "/v1/threads/"+thread, nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/threads/nope", nil, k...), 404)
	mustStatus(t, s.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/messages", nil, k...), 422)
	mustStatus(t, s.do(t, "GET", "/v1/messages/"+msg["id"].(string), nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/messages/nope", nil, k...), 404)
	r = s.do(t, "GET", "/v1/attachments?message_id="+msg["id"].(string), nil, k...)
	mustStatus(t, r, 200)
	items, _ := r.JSON(t)["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("GET /v1/attachments?message_id= listed %d items, want 1", len(items))
	}
	att := items[0].(map[string]any)["id"].(string)
	mustStatus(t, s.do(t, "GET", "/v1/attachments", nil, k...), 422)
	mustStatus(t, s.do(t, "GET", "/v1/attachments?inbox_id=nope", nil, k...), 404)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/"+att, nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/nope", nil, k...), 404)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/"+att+"/content", nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/"+att+"/content?format=base64", nil, k...), 200)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/"+att+"/content?format=hex", nil, k...), 422)
	mustStatus(t, s.do(t, "GET", "/v1/attachments/nope/content", nil, k...), 404)
	mustStatus(t, s.do(t, "GET", "/v1/rate-limit", nil, k...), 200)
	mustStatus(t, s.do(t, "POST", "/v1/search", map[string]any{"query": "Hi", "inbox_id": inbox}, k...), 200)
	mustStatus(t, s.do(t, "POST", "/v1/search", map[string]any{"query": ""}, k...), 422)
	mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+inbox, nil, k...), 204)
	mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+inbox, nil, k...), 404)
}

// The validator itself must catch a response that breaks the document.
func TestCheckResponseCatchesAMismatch(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest("GET", "http://127.0.0.1:1/health", nil)
	ft := &fakeT{TB: t}
	checkResponse(ft, req, 200, http.Header{"Content-Type": {"application/json"}}, []byte(`{"status":"down"}`))
	if !ft.failed {
		t.Error(`{"status":"down"} passed as a /health response`)
	}
	// A body validated once (validBodies) is not validated again, but its
	// headers are each time, and a body that failed fails again.
	send, _ := http.NewRequest("POST", "http://127.0.0.1:1/v1/messages", nil)
	body := []byte(`{"detail":"Rate limit exceeded: per-minute limit reached (5/5)","code":"rate_limited","retry_after":12,"violated":["per-minute"]}`)
	for i, c := range []struct {
		retryAfter string
		body       []byte
		fails      bool
	}{{"12", body, false}, {"0", body, true}, {"12", body, false}, {"12", []byte(`{"status":"down"}`), true}, {"12", []byte(`{"status":"down"}`), true}} {
		ft := &fakeT{TB: t}
		checkResponse(ft, send, 429, http.Header{"Content-Type": {"application/json"}, "Retry-After": {c.retryAfter}}, c.body)
		if ft.failed != c.fails {
			t.Errorf("case %d (Retry-After %s, %s): failed %v, want %v", i, c.retryAfter, c.body, ft.failed, c.fails)
		}
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Errorf(string, ...any) { f.failed = true }
func (f *fakeT) Helper()               {}
