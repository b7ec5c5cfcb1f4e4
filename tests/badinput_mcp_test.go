package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/core/config"
)

// Issue 25's MCP items: /mcp bounded like REST and inside the error
// contract, and `nornweave mcp` keeping its client.

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

// callTool calls a tool with the SDK's client and fails on a protocol error.
func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// structured is a result's structuredContent as JSON and as a map.
func structured(t *testing.T, res *mcp.CallToolResult) ([]byte, map[string]any) {
	t.Helper()
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return b, m
}

// resultText is a result's text content.
func resultText(res *mcp.CallToolResult) string {
	if len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// TestBadInputMCPAnswersBounded: a list longer than 8 MiB of JSON is cut
// and read on with next_offset; a large result is not repeated in the
// text; get_attachment_content refuses a file over 5 MiB with the REST URL
// that streams it. On both databases.
func TestBadInputMCPAnswersBounded(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, nil)
		inbox := s.createInbox(t, "big")
		// 40 messages of 300 KB of short lines: every newline is two
		// bytes of JSON, so a page of bodies is more JSON than its bytes.
		body := strings.Repeat("ab\n", 100<<10)
		for i := range 40 {
			r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
				"subject": fmt.Sprintf("m%d", i), "body": body})
			mustStatus(t, r, http.StatusCreated)
		}
		cs, err := connectHTTP(context.Background(), s.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()

		seen := map[string]int{}
		offset, pages := 0, 0
		for {
			res := callTool(t, cs, "list_messages", map[string]any{"inbox_id": inbox, "limit": 50, "offset": offset})
			raw, sc := structured(t, res)
			if res.IsError {
				t.Fatalf("list_messages: %s", raw)
			}
			if len(raw) > 8<<20+4<<10 {
				t.Errorf("page at offset %d: structuredContent is %d bytes, over 8 MiB", offset, len(raw))
			}
			if text := resultText(res); len(text) > 16<<10 || !strings.Contains(text, "structuredContent") {
				t.Errorf("page at offset %d: text content is %d bytes (%.80q), want a pointer to structuredContent",
					offset, len(text), text)
			}
			for _, it := range sc["items"].([]any) {
				seen[it.(map[string]any)["id"].(string)]++
			}
			pages++
			next, ok := sc["next_offset"].(float64)
			if !ok || pages > 40 {
				break
			}
			offset = int(next)
		}
		if len(seen) != 40 || pages < 2 {
			t.Errorf("read %d distinct messages in %d pages, want 40 in several", len(seen), pages)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("message %s read %d times", id, n)
			}
		}

		// Attachments: 6 MiB is refused with the route that streams it;
		// 1 MiB is answered, its base64 in structuredContent only.
		big, small := make([]byte, 6<<20), bytes.Repeat([]byte("x"), 1<<20)
		r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"},
			"subject": "files", "body": "b", "attachments": []map[string]any{
				{"filename": "big.bin", "content_type": "application/octet-stream", "content_base64": base64.StdEncoding.EncodeToString(big)},
				{"filename": "small.txt", "content_type": "text/plain", "content_base64": base64.StdEncoding.EncodeToString(small)}}})
		mustStatus(t, r, http.StatusCreated)
		atts := s.do(t, "GET", "/v1/attachments?message_id="+r.JSON(t)["id"].(string), nil).JSON(t)["items"].([]any)
		ids := map[string]string{}
		for _, a := range atts {
			ids[a.(map[string]any)["filename"].(string)] = a.(map[string]any)["id"].(string)
		}
		res := callTool(t, cs, "get_attachment_content", map[string]any{"attachment_id": ids["big.bin"]})
		raw, sc := structured(t, res)
		url := "/v1/attachments/" + ids["big.bin"] + "/content"
		if !res.IsError || sc["code"] != "attachment_too_large" || !strings.Contains(sc["detail"].(string), url) ||
			!strings.Contains(sc["detail"].(string), "5 MiB") {
			t.Errorf("6 MiB attachment: %.300s, want a refusal attachment_too_large naming 5 MiB and %s", raw, url)
		}
		if got := s.do(t, "GET", url, nil); got.Status != 200 || len(got.Body) != len(big) {
			t.Errorf("GET %s: %d, %d bytes", url, got.Status, len(got.Body))
		}
		res = callTool(t, cs, "get_attachment_content", map[string]any{"attachment_id": ids["small.txt"]})
		raw, sc = structured(t, res)
		if content, _ := sc["content"].(string); res.IsError || content != base64.StdEncoding.EncodeToString(small) {
			t.Errorf("1 MiB attachment: %.300s", raw)
		}
		if text := resultText(res); len(text) > 16<<10 {
			t.Errorf("1 MiB attachment: the text content carries %d bytes too", len(text))
		}
	})
}

// TestBadInputMCPSchemasForAnAgent: the schemas say what the binder
// checks, the annotations are true, a throttled send is told about
// on_throttle "queue", and the scheduled_at hint's example is accepted.
func TestBadInputMCPSchemasForAnAgent(t *testing.T) {
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "agent")
		cs, err := connectHTTP(context.Background(), s.URL, "")
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		tools, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools.Tools {
			a := tool.Annotations
			if a.ReadOnlyHint && !a.IdempotentHint {
				t.Errorf("%s: read-only but idempotentHint false", tool.Name)
			}
			if !a.ReadOnlyHint && a.DestructiveHint == nil {
				t.Errorf("%s: writes, and does not say whether it is destructive (the default is true)", tool.Name)
			}
			if !strings.HasPrefix(tool.Name, "send_email") {
				continue
			}
			b, _ := json.Marshal(tool.InputSchema)
			var in struct {
				Properties map[string]struct {
					Enum   []string
					Format string
				}
			}
			_ = json.Unmarshal(b, &in)
			if got := in.Properties["on_throttle"].Enum; strings.Join(got, ",") != "reject,queue" {
				t.Errorf("%s: on_throttle enum = %v, want [reject queue]", tool.Name, got)
			}
			if got := in.Properties["scheduled_at"].Format; got != "date-time" {
				t.Errorf("%s: scheduled_at format = %q, want date-time", tool.Name, got)
			}
			if strings.Contains(tool.Description, "2030") {
				t.Errorf("%s: its description's example is dated 2030, beyond SCHEDULE_MAX_AHEAD", tool.Name)
			}
		}

		send := func(extra map[string]any) *mcp.CallToolResult {
			args := map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"}, "subject": "s", "body": "b"}
			for k, v := range extra {
				args[k] = v
			}
			return callTool(t, cs, "send_email", args)
		}
		// The hint for a bad scheduled_at gives an example; it is accepted.
		res := send(map[string]any{"scheduled_at": "tomorrow"})
		raw, _ := structured(t, res)
		example := regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00`).FindString(string(raw))
		if !res.IsError || example == "" {
			t.Fatalf("scheduled_at tomorrow: %s, want a refusal with an example", raw)
		}
		res = send(map[string]any{"scheduled_at": example})
		if raw, sc := structured(t, res); res.IsError || sc["status"] != "scheduled" {
			t.Errorf("scheduled_at %s, the hint's example: %s, want scheduled", example, raw)
		}
		// A throttled send is told it could have queued.
		if res := send(nil); res.IsError {
			raw, _ := structured(t, res)
			t.Fatalf("first send: %s", raw)
		}
		res = send(nil)
		if raw, sc := structured(t, res); !res.IsError || sc["code"] != "rate_limited" ||
			!strings.Contains(resultText(res), `on_throttle: "queue"`) {
			t.Errorf("throttled send: %s %q, want rate_limited mentioning on_throttle: \"queue\"", raw, resultText(res))
		}
	})
}

// TestBadInputMCPStdio: `nornweave mcp` answers a line that is not JSON
// with -32700 and keeps serving; a wrong key is reported as a wrong key.
func TestBadInputMCPStdio(t *testing.T) {
	s := startDefault(t, "sqlite", func(c *config.Config) { c.APIKey = mcpKey })
	t.Run("a line that is not JSON", func(t *testing.T) { stdioReadsOn(t, s.URL) })
	t.Run("wrong key", func(t *testing.T) {
		wrong := exec.Command(nornweaveBinary(t), "mcp")
		wrong.Env = append(cleanEnv(), "NORNWEAVE_API_URL="+s.URL, "NORNWEAVE_API_KEY=not-the-key")
		out, err := wrong.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "401") || !strings.Contains(string(out), "NORNWEAVE_API_KEY") ||
			strings.Contains(string(out), "cannot reach") {
			t.Errorf("wrong key: %v, %s; want a failure saying the key is wrong, not that the server cannot be reached", err, out)
		}
	})
}

// stdioReadsOn runs `nornweave mcp` against url, sends it a line that is
// not JSON between two requests, and checks both requests are answered.
func stdioReadsOn(t *testing.T, url string) {
	cmd := exec.Command(nornweaveBinary(t), "mcp")
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "NORNWEAVE_API_URL="+url, "NORNWEAVE_API_KEY="+mcpKey)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	startUntilCleanup(t, cmd, exited, "nornweave mcp stderr", stderr)
	lines := bufio.NewScanner(stdout)
	lines.Buffer(nil, 16<<20)
	next := func() rpcAnswer {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("stdout ended (%v); stderr: %s", lines.Err(), stderr.String())
		}
		var a rpcAnswer
		if err := json.Unmarshal(lines.Bytes(), &a); err != nil {
			t.Fatalf("stdout line %q: %v", lines.Text(), err)
		}
		return a
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
		`"capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if a := next(); a.Result == nil {
		t.Fatalf("initialize: %+v", a)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	fmt.Fprintln(stdin, `this is not JSON`)
	if a := next(); a.Error == nil || a.Error.Code != -32700 || string(a.ID) != "null" {
		t.Fatalf("a line that is not JSON: %+v, want -32700", a)
	}
	fmt.Fprintln(stdin, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if a := next(); a.Result == nil || string(a.ID) != "2" || !bytes.Contains(a.Result, []byte("send_email")) {
		t.Fatalf("tools/list after the bad line: %+v", a)
	}
	stdin.Close()
	if err := <-exited; err != nil {
		t.Errorf("nornweave mcp exited with %v after stdin closed; stderr: %s", err, stderr.String())
	}
}
