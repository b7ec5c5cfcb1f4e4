package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
)

// mcpPost posts body to /mcp as a streamable-HTTP client does, with extra
// headers (name, value, ...), and returns the raw answer.
func mcpPost(t *testing.T, url string, body io.Reader, headers ...string) response {
	t.Helper()
	req, err := http.NewRequest("POST", url+"/mcp", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /mcp: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// rpcAnswer is a JSON-RPC answer with its id as sent.
type rpcAnswer struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  json.RawMessage `json:"result"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// TestBadInputMCPTransport: batches are refused before their items run,
// for every protocol version; what the transport refuses is a JSON-RPC
// error or the API's {detail, code}, never text; ids come back as sent.
func TestBadInputMCPTransport(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) {
		c.AttachmentMaxSizeMB, c.AttachmentMaxTotalSizeMB = 1, 1 // a request limit of about 8 MiB
	})
	list := `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`
	batch := "[" + strings.TrimSuffix(strings.Repeat(list+",", 20), ",") + "]"
	rpc := func(code int, id string) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var a rpcAnswer
			if err := json.Unmarshal(r.Body, &a); err != nil || a.JSONRPC != "2.0" || a.Error == nil ||
				a.Error.Code != code || string(a.ID) != id {
				t.Errorf("answer %.300s, want a JSON-RPC error %d with id %s", r.Body, code, id)
			}
		}
	}
	result := func(id string) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var a rpcAnswer
			if err := json.Unmarshal(r.Body, &a); err != nil || a.Result == nil || string(a.ID) != id {
				t.Errorf("answer %.300s, want a result with id %s exactly", r.Body, id)
			}
		}
	}
	apiError := func(code string) func(t *testing.T, r response) {
		return func(t *testing.T, r response) {
			var e struct{ Detail, Code string }
			if err := json.Unmarshal(r.Body, &e); err != nil || e.Code != code || e.Detail == "" {
				t.Errorf("answer %.300q, want the API's {detail, code: %s}", r.Body, code)
			}
		}
	}
	for _, tc := range []struct {
		name    string
		body    string
		headers []string
		status  int
		check   func(t *testing.T, r response)
	}{
		{"batch of 20, no protocol version", batch, nil, 400, rpc(-32600, "null")},
		{"batch of 20, protocol 2025-03-26", batch, []string{"Mcp-Protocol-Version", "2025-03-26"}, 400, rpc(-32600, "null")},
		{"batch, current protocol", batch, []string{"Mcp-Protocol-Version", "2025-06-18"}, 400, rpc(-32600, "null")},
		{"empty batch", " []", nil, 400, rpc(-32600, "null")},
		{"malformed JSON", `{"jsonrpc":"2.0","id":1,`, nil, 400, rpc(-32700, "null")},
		{"empty body", ``, nil, 400, rpc(-32700, "null")},
		{"not an object", `"tools/list"`, nil, 400, rpc(-32600, "null")},
		{"jsonrpc 1.0", `{"jsonrpc":"1.0","id":"a","method":"ping"}`, nil, 400, rpc(-32600, `"a"`)},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, nil, 400, rpc(-32600, "null")},
		{"unknown method", `{"jsonrpc":"2.0","id":3,"method":"nope"}`, nil, 400, rpc(-32601, "3")},
		{"call without params", `{"jsonrpc":"2.0","id":4,"method":"tools/call"}`, nil, 400, rpc(-32600, "4")},
		{"id 1.5", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, nil, 200, result("1.5")},
		{"id -2.5e3", `{"jsonrpc":"2.0","method":"ping","id":-2.5e3}`, nil, 200, result("-2.5e3")},
		{"id beyond float64's integers", `{"jsonrpc":"2.0","id":12345678901234567891,"method":"ping"}`, nil, 200,
			result("12345678901234567891")},
		{"string id", `{"jsonrpc":"2.0","id":"1.5","method":"ping"}`, nil, 200, result(`"1.5"`)},
		{"integer id", `{"jsonrpc":"2.0","id":42,"method":"ping"}`, nil, 200, result("42")},
		{"unknown protocol version", list, []string{"Mcp-Protocol-Version", "1999-01-01"}, 400, apiError("bad_request")},
		{"Accept without event-stream", list, []string{"Accept", "application/json"}, 400, apiError("bad_request")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := mcpPost(t, s.URL, strings.NewReader(tc.body), tc.headers...)
			if r.Status != tc.status || !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
				t.Errorf("status %d %q, want %d application/json; body %.300s", r.Status,
					r.Header.Get("Content-Type"), tc.status, r.Body)
			}
			tc.check(t, r)
		})
	}

	t.Run("chunked body over the limit", func(t *testing.T) {
		body := io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"`),
			io.LimitReader(repeatReader('a'), 12<<20), strings.NewReader(`"}}`))
		r := mcpPost(t, s.URL, body) // no length: chunked
		if r.Status != 413 {
			t.Errorf("status %d, want 413; body %.300s", r.Status, r.Body)
		}
		apiError("payload_too_large")(t, r)
	})

	t.Run("slow upload", func(t *testing.T) {
		c, err := net.Dial("tcp", strings.TrimPrefix(s.URL, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: %d\r\n\r\n{\"jsonrpc\":\"2.0\",\"id\":1,", 1<<20)
		go func() {
			for range 60 {
				time.Sleep(time.Second)
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
		_ = c.SetReadDeadline(time.Now().Add(60 * time.Second))
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("no answer to a trickled body: %v", err)
		}
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusRequestTimeout {
			t.Errorf("status %d, want 408; body %s", res.StatusCode, b)
		}
		apiError("request_timeout")(t, response{Body: b})
	})
}

// repeatReader is an endless run of one byte.
type repeatReader byte

func (r repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}
