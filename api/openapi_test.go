package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api/admin"
)

// pathParam turns echo's ":id" into OpenAPI's "{id}".
var pathParam = regexp.MustCompile(`:([A-Za-z_]+)`)

// The document and the router must describe the same API: a route the
// document lacks, or an operation no route serves, fails here.
func TestOpenAPIMatchesTheRoutes(t *testing.T) {
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPIDocument, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1") {
		t.Errorf("openapi = %q, want 3.1", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			if method != "parameters" {
				documented[strings.ToUpper(method)+" "+path] = true
			}
		}
	}
	served := map[string]bool{}
	for _, r := range newTestAPI(nil, "").(*Server).Routes() {
		if r.Path == "/mcp" {
			continue // JSON-RPC, not REST: README's "Use from an AI agent"
		}
		if admin.IsPath(r.Path) {
			continue // the dashboard: HTML forms for a browser, docs/operations.md
		}
		served[r.Method+" "+pathParam.ReplaceAllString(r.Path, "{$1}")] = true
	}
	for _, k := range sortedSet(served) {
		if !documented[k] {
			t.Errorf("route %s is served but not in openapi.json", k)
		}
	}
	for _, k := range sortedSet(documented) {
		if !served[k] {
			t.Errorf("openapi.json documents %s, which no route serves", k)
		}
	}
}

func sortedSet(m map[string]bool) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestOpenAPIAndDocsAreServedWithoutAKey(t *testing.T) {
	h := newTestAPI(nil, "key")
	rec := serve(h, "GET", "/openapi.json", "")
	if rec.Code != http.StatusOK || !json.Valid(rec.Body.Bytes()) {
		t.Fatalf("GET /openapi.json = %d, want 200 with JSON", rec.Code)
	}
	rec = serve(h, "GET", "/docs", "")
	if rec.Code != http.StatusOK || !strings.Contains(rec.Header().Get("Content-Type"), "text/html") {
		t.Fatalf("GET /docs = %d %s, want 200 HTML", rec.Code, rec.Header().Get("Content-Type"))
	}
}

// Uptime checkers use HEAD: it answers as GET does, without the body. A
// real server, since net/http is what drops a HEAD's body.
func TestHeadOnHealthRoutes(t *testing.T) {
	h := newTestAPI(nil, "key")
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, tt := range []struct {
		path   string
		status int
	}{{"/health", http.StatusOK}, {"/ready", http.StatusServiceUnavailable}} {
		get, err := http.Get(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		get.Body.Close()
		head, err := http.Head(srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != tt.status || get.StatusCode != tt.status {
			t.Errorf("%s: GET %d, HEAD %d, want both %d", tt.path, get.StatusCode, head.StatusCode, tt.status)
		}
		if len(body) != 0 {
			t.Errorf("HEAD %s has a body: %q", tt.path, body)
		}
		if head.Header.Get("Content-Type") != get.Header.Get("Content-Type") {
			t.Errorf("HEAD %s Content-Type %q, GET %q", tt.path, head.Header.Get("Content-Type"), get.Header.Get("Content-Type"))
		}
	}
	if body := serve(h, "GET", "/ready", "").Body.String(); !strings.Contains(body, `"database":"unreachable"`) {
		t.Errorf("/ready body %s, want the database named as unreachable", body)
	}
}

// recMetrics records what the HTTP layer reports.
type recMetrics struct {
	nopMetrics
	routes   []string
	replayed int
}

func (m *recMetrics) Request(method, route string, status int, _ time.Duration) {
	m.routes = append(m.routes, method+" "+route+" "+http.StatusText(status))
}

func TestMetricsRouteAndLabels(t *testing.T) {
	m := &recMetrics{}
	h := New(Options{Store: fakeStore{}, Throttle: nil, Metrics: m, MetricsAPIKey: "mk", APIKey: "key"})
	if rec := serve(h, "GET", "/metrics", ""); rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /metrics without the key = %d, want 401", rec.Code)
	}
	if rec := serve(h, "GET", "/metrics", "", "Authorization", "Bearer mk"); rec.Code != http.StatusOK {
		t.Errorf("GET /metrics with the key = %d, want 200", rec.Code)
	}
	if rec := serve(h, "GET", "/metrics", "", "X-API-Key", "key"); rec.Code != http.StatusUnauthorized {
		t.Errorf("GET /metrics with API_KEY instead of METRICS_API_KEY = %d, want 401", rec.Code)
	}
	serve(h, "GET", "/v1/inboxes/0b3c2f4e-secret-id", "", "X-API-Key", "key")
	serve(h, "GET", "/no/such/page/123", "")
	want := []string{"GET /metrics Unauthorized", "GET /metrics OK", "GET /metrics Unauthorized",
		"GET /v1/inboxes/:id Not Found", "GET unmatched Not Found"}
	if !slices.Equal(m.routes, want) {
		t.Errorf("reported %q, want %q", m.routes, want)
	}
	if open := New(Options{Store: fakeStore{}, Metrics: m}); serve(open, "GET", "/metrics", "").Code != http.StatusOK {
		t.Error("GET /metrics without METRICS_API_KEY set should be open")
	}
}

// MCP is not described in the document (JSON-RPC is not REST), but /docs
// points to where it is: docs/mcp.md's section, which must exist.
func TestOpenAPILinksToTheMCPSection(t *testing.T) {
	var doc struct {
		Info struct{ Description string } `json:"info"`
	}
	if err := json.Unmarshal(OpenAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	const link = "https://github.com/nornweave/nornweave/blob/main/docs/mcp.md#use-from-an-ai-agent"
	if !strings.Contains(doc.Info.Description, "("+link+")") {
		t.Errorf("info.description does not link to the MCP page (%s): %s", link, doc.Info.Description)
	}
	page, err := os.ReadFile("../docs/mcp.md")
	if err != nil {
		t.Fatal(err)
	}
	// GitHub's anchor #use-from-an-ai-agent is this heading's, at any level.
	if !regexp.MustCompile(`(?m)^#+ Use from an AI agent$`).Match(page) {
		t.Error(`docs/mcp.md has no "Use from an AI agent" heading for the link`)
	}
}
