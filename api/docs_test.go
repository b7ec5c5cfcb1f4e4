package api

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The page and every file it references are served from the binary with
// the page's own CSP, which allows nothing inline and nothing from
// elsewhere; the API routes keep theirs.
func TestDocsPageAndItsFiles(t *testing.T) {
	h := newTestAPI(nil, "key")
	page := serve(h, "GET", "/docs", "")
	if page.Code != http.StatusOK || page.Header().Get("Content-Type") != "text/html; charset=UTF-8" {
		t.Fatalf("GET /docs = %d %q", page.Code, page.Header().Get("Content-Type"))
	}
	if got := page.Header().Get("Content-Security-Policy"); got != docsCSP {
		t.Errorf("/docs CSP = %q, want %q", got, docsCSP)
	}
	for _, bad := range []string{"unsafe-inline", "unsafe-eval", "http:", "https:", "*"} {
		if strings.Contains(docsCSP, bad) {
			t.Errorf("the docs CSP allows %s", bad)
		}
	}
	html := page.Body.String()
	// Nothing inline for the CSP to allow: every script has a src, no
	// style element or attribute, no handler attribute, no other site.
	for _, re := range []string{`<script(?:\s[^>]*)?>[^<]`, `<style`, `\sstyle=`, `\son[a-z]+=`, `https?://`} {
		if m := regexp.MustCompile(re).FindString(html); m != "" {
			t.Errorf("/docs has %q (pattern %s)", m, re)
		}
	}
	for _, tag := range regexp.MustCompile(`<script[^>]*>`).FindAllString(html, -1) {
		if !strings.Contains(tag, ` src="`) {
			t.Errorf("/docs has an inline script: %s", tag)
		}
	}
	refs := regexp.MustCompile(`(?:src|href)="([^"]+)"`).FindAllStringSubmatch(html, -1)
	if len(refs) < 5 {
		t.Fatalf("/docs references %d files, want the bundle, styles, init.js, icon and /openapi.json", len(refs))
	}
	for _, m := range refs {
		url := m[1]
		if url == "/openapi.json" {
			continue
		}
		if !strings.HasPrefix(url, "/docs/") {
			t.Errorf("/docs references %s, outside /docs/", url)
			continue
		}
		rec := serve(h, "GET", url, "")
		if rec.Code != http.StatusOK || rec.Body.Len() == 0 || rec.Header().Get("Content-Security-Policy") != docsCSP {
			t.Errorf("GET %s = %d, %d bytes, CSP %q", url, rec.Code, rec.Body.Len(), rec.Header().Get("Content-Security-Policy"))
		}
	}
	for url, ctype := range map[string]string{"/docs/swagger-ui-bundle.js": "text/javascript; charset=utf-8",
		"/docs/swagger-ui.css": "text/css; charset=utf-8", "/docs/init.js": "text/javascript; charset=utf-8",
		"/docs/favicon-32x32.png": "image/png", "/docs/LICENSE": "text/plain; charset=UTF-8"} {
		if got := serve(h, "GET", url, "").Header().Get("Content-Type"); got != ctype {
			t.Errorf("GET %s Content-Type %q, want %q", url, got, ctype)
		}
	}
	if init := serve(h, "GET", "/docs/init.js", "").Body.String(); !strings.Contains(init, `url: "/openapi.json"`) ||
		!strings.Contains(init, "validatorUrl: null") {
		t.Errorf("init.js does not load /openapi.json with the validator off:\n%s", init)
	}
	for _, url := range []string{"/docs/nothing.js", "/docs/index.html", "/docs/../openapi.json"} {
		if rec := serve(h, "GET", url, ""); rec.Code != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", url, rec.Code)
		}
	}
	if got := serve(h, "GET", "/health", "").Header().Get("Content-Security-Policy"); got != "default-src 'none'; frame-ancestors 'none'" {
		t.Errorf("an API route's CSP = %q, want the strict one", got)
	}
}

// HEAD /docs answers as GET without the body (it was a 405), on a real
// server since net/http is what drops a HEAD's body; a known ETag is a 304.
func TestDocsHeadAndRevalidation(t *testing.T) {
	srv := httptest.NewServer(newTestAPI(nil, "key"))
	defer srv.Close()
	for _, path := range []string{"/docs", "/docs/swagger-ui-bundle.js"} {
		get, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(get.Body)
		get.Body.Close()
		head, err := http.Head(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		headBody, _ := io.ReadAll(head.Body)
		head.Body.Close()
		if head.StatusCode != http.StatusOK || get.StatusCode != http.StatusOK || len(headBody) != 0 {
			t.Errorf("%s: GET %d, HEAD %d with %d bytes of body", path, get.StatusCode, head.StatusCode, len(headBody))
		}
		for _, k := range []string{"Content-Type", "Content-Length", "Content-Security-Policy", "Etag"} {
			if head.Header.Get(k) != get.Header.Get(k) || get.Header.Get(k) == "" {
				t.Errorf("%s: %s: HEAD %q, GET %q", path, k, head.Header.Get(k), get.Header.Get(k))
			}
		}
		if get.Header.Get("Content-Length") != strconv.Itoa(len(body)) {
			t.Errorf("%s: Content-Length %s, body %d bytes", path, get.Header.Get("Content-Length"), len(body))
		}
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("If-None-Match", get.Header.Get("Etag"))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("%s with its ETag = %d, want 304", path, res.StatusCode)
		}
	}
}
