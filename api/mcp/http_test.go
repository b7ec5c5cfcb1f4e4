package mcp

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/store"
)

// initialize is a client's first message.
const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
	`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

// /mcp is behind the same middleware as /v1: the API key with its
// lockout, the cross-site check, JSON only; its refusals are the API's
// JSON errors, not the transport's plain text.
func TestMCPEndpointSharesTheAPIsRules(t *testing.T) {
	ok := fakeSender(func() (*store.Message, error) { return &store.Message{ID: "m", Status: "sent"}, nil })
	o := api.Options{Store: fakeStore{}, Sender: ok, Throttle: memThrottle(5, 0), APIKey: "key",
		AuthFailureLimit: 3, CORSOrigins: []string{"https://app.example"}, AttachmentMaxSize: 1 << 20,
		AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2}
	withMCP(&o)
	h := api.New(o)
	accept := []string{"Accept", "application/json, text/event-stream"}
	key := append([]string{"X-API-Key", "key"}, accept...)
	tests := []struct {
		name    string
		method  string
		ctype   string
		headers []string
		status  int
		want    string
	}{
		{"X-API-Key", "POST", "application/json", key, 200, `"serverInfo":{"name":"nornweave"`},
		{"Bearer", "POST", "application/json", append([]string{"Authorization", "Bearer key"}, accept...), 200, `"protocolVersion"`},
		{"no key", "POST", "application/json", accept, 401, `{"detail":"Missing or invalid API key","code":"unauthorized"}`},
		{"wrong key", "POST", "application/json", append([]string{"X-API-Key", "nope"}, accept...), 401, `"code":"unauthorized"`},
		{"cross-site origin", "POST", "application/json", append([]string{"Origin", "https://evil.example"}, key...),
			403, `"code":"cross_site_forbidden"`},
		{"allowed origin", "POST", "application/json", append([]string{"Origin", "https://app.example"}, key...), 200, `"result"`},
		{"text/plain", "POST", "text/plain", key, 415, `"code":"unsupported_media_type"`},
		{"GET: no server stream in a stateless server", "GET", "", key, 405, `"code":"method_not_allowed"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := localRequest(tt.method, "/mcp", strings.NewReader(initialize))
			if tt.method == "GET" {
				req = localRequest(tt.method, "/mcp", nil)
			}
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
			if tt.status == 401 && rec.Header().Get("WWW-Authenticate") != "Bearer" {
				t.Errorf("401 without WWW-Authenticate: Bearer")
			}
		})
	}
	// Two failures above; the third from the same address locks it out,
	// even with the right key, as on /v1.
	for range 2 {
		serve(h, "POST", "/mcp", initialize, accept...)
	}
	if rec := serve(h, "POST", "/mcp", initialize, key...); rec.Code != http.StatusTooManyRequests ||
		!strings.Contains(rec.Body.String(), "too_many_auth_failures") {
		t.Errorf("after the limit of failures: %d %s, want 429 too_many_auth_failures", rec.Code, rec.Body)
	}
}

// The SDK's own Host check is off: the API's Host rules (the chain /mcp
// shares with /v1) decide, so a request through a reverse proxy on
// loopback that forwards its public name is not the SDK's plain-text 403.
func TestMCPHostIsTheAPIsToJudge(t *testing.T) {
	h, _ := newTestAPI(nil, "")
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, err := http.NewRequest("POST", srv.URL+"/mcp", strings.NewReader(initialize))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "mail.example.com"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "application/json") || strings.Contains(string(body), "invalid Host header") {
		t.Errorf("Host mail.example.com on loopback: %d %s %s, want the API's JSON answer", res.StatusCode,
			res.Header.Get("Content-Type"), body)
	}
}

// The SDK's streamable-HTTP client, as agents use it, through the API key.
func TestMCPOverHTTPWithTheSDKClient(t *testing.T) {
	ok := fakeSender(func() (*store.Message, error) { return &store.Message{ID: "m", ThreadID: "t", Status: "sent"}, nil })
	h, _ := newTestAPI(ok, "key")
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	transport := &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp",
		HTTPClient: &http.Client{Transport: keyTransport{"key"}}}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "send_email", Arguments: map[string]any{
		"inbox_id": "i", "to": []string{"a@b.test"}, "subject": "s", "body": ""}})
	if err != nil || res.IsError {
		t.Fatalf("send_email over HTTP: %v %+v", err, res)
	}
	if got := res.StructuredContent.(map[string]any)["message_id"]; got != "m" {
		t.Errorf("message_id = %v, want m", got)
	}

	bare := &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp"}
	if _, err := client.Connect(ctx, bare, nil); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
		t.Errorf("connect without the key: %v, want 401 Unauthorized", err)
	}
}

// keyTransport adds the API key to every request.
type keyTransport struct{ key string }

func (k keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("X-API-Key", k.key)
	return http.DefaultTransport.RoundTrip(r)
}
