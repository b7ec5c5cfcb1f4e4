package api

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// A browser page of an allowed origin may call every route: the preflight
// allows each route's method on its path (PATCH was once missing, so a
// dashboard could not change an inbox).
func TestCORSPreflightAllowsEveryRoutesMethod(t *testing.T) {
	h := newTestAPI(nil, "key")
	for _, r := range h.(*Server).Routes() {
		path := pathParam.ReplaceAllString(r.Path, "x")
		rec := serve(h, http.MethodOptions, path, "", "Origin", "https://app.example",
			"Access-Control-Request-Method", r.Method, "Access-Control-Request-Headers", "content-type,x-api-key,idempotency-key")
		allowed := splitHeader(rec.Header().Get("Access-Control-Allow-Methods"))
		if rec.Code != http.StatusNoContent || !slices.Contains(allowed, r.Method) ||
			rec.Header().Get("Access-Control-Allow-Origin") != "https://app.example" {
			t.Errorf("preflight of %s %s = %d, Allow-Methods %q, Allow-Origin %q", r.Method, path, rec.Code,
				allowed, rec.Header().Get("Access-Control-Allow-Origin"))
		}
		for _, want := range []string{"Content-Type", "X-API-Key", "Idempotency-Key", "Authorization"} {
			if !slices.Contains(splitHeader(rec.Header().Get("Access-Control-Allow-Headers")), want) {
				t.Errorf("preflight of %s %s does not allow the header %s", r.Method, path, want)
			}
		}
	}
	// An origin that is not listed gets no CORS headers.
	rec := serve(h, http.MethodOptions, "/v1/inboxes/x", "", "Origin", "https://evil.example",
		"Access-Control-Request-Method", http.MethodPatch)
	if got := rec.Header().Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("preflight from an unlisted origin: Allow-Origin %q", got)
	}
}

// Every response header the OpenAPI document declares is readable by a
// page of an allowed origin: Idempotent-Replayed, Retry-After, the
// rate-limit headers and X-Request-Id among them.
func TestCORSExposesEveryDocumentedHeader(t *testing.T) {
	var doc struct {
		Components struct {
			Headers map[string]json.RawMessage `json:"headers"`
		} `json:"components"`
	}
	if err := json.Unmarshal(OpenAPIDocument, &doc); err != nil {
		t.Fatal(err)
	}
	rec := serve(newTestAPI(nil, "key"), http.MethodGet, "/v1/rate-limit", "", "Origin", "https://app.example",
		"X-API-Key", "key")
	exposed := splitHeader(rec.Header().Get("Access-Control-Expose-Headers"))
	if len(doc.Components.Headers) < 9 {
		t.Fatalf("openapi.json declares %d headers; the test reads the wrong place", len(doc.Components.Headers))
	}
	for name := range doc.Components.Headers {
		if !slices.ContainsFunc(exposed, func(e string) bool { return strings.EqualFold(e, name) }) {
			t.Errorf("header %s is documented but not exposed to browsers (exposed: %q)", name, exposed)
		}
	}
}

func splitHeader(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
