package api

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The answers net/http gives by itself, before any handler, are JSON like
// every other when the server listens through Listener.
func TestGoErrorsAreJSON(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: New(Options{Store: fakeStore{}}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(Listener(l)) }()
	defer srv.Close()

	bigHeader := "X-Big: " + strings.Repeat("a", 2<<20) + "\r\n" // beyond MaxHeaderBytes (1 MB)
	for _, tt := range []struct {
		name, request string
		status        int
		code          string
	}{
		{"bad escape in the path", "GET /v1/messages/%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request"},
		{"bad escape in an inbox id", "DELETE /v1/inboxes/%g0 HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "bad_request"},
		{"no Host", "GET /health HTTP/1.1\r\n\r\n", 400, "bad_request"},
		{"bad header name", "GET /health HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n", 400, "bad_request"},
		{"header block over 1 MB", "GET /health HTTP/1.1\r\nHost: localhost\r\n" + bigHeader + "\r\n", 431, "headers_too_large"},
		{"unknown transfer encoding", "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "not_implemented"},
		{"a handler's answer is untouched", "GET /health HTTP/1.1\r\nHost: localhost\r\n\r\n", 200, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			go func() { _, _ = io.WriteString(c, tt.request) }() // a large one is not read whole
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.status || res.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("got %d %q %s, want %d in JSON", res.StatusCode, res.Header.Get("Content-Type"), b, tt.status)
			}
			var body struct {
				Detail string `json:"detail"`
				Code   string `json:"code"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("body %q: %v", b, err)
			}
			if tt.code != "" && (body.Code != tt.code || body.Detail == "") {
				t.Errorf("body = %+v, want code %q and a detail", body, tt.code)
			}
		})
	}
}

func TestRewriteGoErrorLeavesOtherWritesAlone(t *testing.T) {
	for _, p := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\nhello\r\nworld",
		"HTTP/1.1 400 Bad Request\r\nDate: x" + goErrorHeaders + "400 Bad Request",
		"hello " + goErrorHeaders,
		"HTTP/1.1 4",
	} {
		if out, ok := rewriteGoError([]byte(p)); ok {
			t.Errorf("rewriteGoError(%q) = %q, want it left alone", p, out)
		}
	}
	out, ok := rewriteGoError([]byte("HTTP/1.1 400 Bad Request: missing required Host header" + goErrorHeaders + "400 Bad Request: missing required Host header"))
	if !ok || !strings.Contains(string(out), `{"detail":"Malformed HTTP request: missing required Host header","code":"bad_request"}`) {
		t.Errorf("rewriteGoError = %q, want the reason in the detail", out)
	}
}
