package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/core/config"
)

// Issue 25's MCP items: /mcp bounded like REST and inside the error
// contract, and `nornweave mcp` keeping its client.

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

// TestBadInputMCPAnswersBounded: a list longer than an answer's cap of
// JSON is cut and read on with next_offset; a large result is not
// repeated in the text; get_attachment_content refuses a file over five
// eighths of the cap with the REST URL that streams it. On both databases.
// The cap is 8 MiB, and the attachments' 5 MiB; here the server's is
// 256 KiB (app.WithPageBytes), and every size a 32nd of what it would be,
// the same cuts for a 32nd of the bytes, which cost seconds each under
// -race (TestFitPage holds the cut's arithmetic at the real size's ratio).
func TestBadInputMCPAnswersBounded(t *testing.T) {
	t.Parallel()
	const capBytes = 256 << 10
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startPaged(t, driver, capBytes)
		inbox := s.createInbox(t, "big")
		// 40 messages of 1,792 bytes of backslashes: each is two bytes of
		// JSON in the text and again in content_clean, and every pair one
		// backslash in the HTML, so a page of bodies is more JSON than its
		// bytes (five times), and the 40 are 350 KB of JSON.
		body := strings.Repeat(`\\`, 28<<10/32)
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
			if len(raw) > capBytes+4<<10 {
				t.Errorf("page at offset %d: structuredContent is %d bytes, over %d", offset, len(raw), capBytes)
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
		t.Logf("list_messages: 40 messages in %d pages", pages)
		if len(seen) != 40 || pages < 2 {
			t.Errorf("read %d distinct messages in %d pages, want 40 in several", len(seen), pages)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("message %s read %d times", id, n)
			}
		}

		// Attachments: six fifths of the limit (160 KiB) is refused with the
		// route that streams it; a fifth is answered, its base64 in
		// structuredContent only.
		big, small := make([]byte, 192<<10), bytes.Repeat([]byte("x"), 32<<10)
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
			!strings.Contains(sc["detail"].(string), "(160 KiB)") {
			t.Errorf("192 KiB attachment: %.300s, want a refusal attachment_too_large naming 160 KiB and %s", raw, url)
		}
		if got := s.do(t, "GET", url, nil); got.Status != 200 || len(got.Body) != len(big) {
			t.Errorf("GET %s: %d, %d bytes", url, got.Status, len(got.Body))
		}
		res = callTool(t, cs, "get_attachment_content", map[string]any{"attachment_id": ids["small.txt"]})
		raw, sc = structured(t, res)
		if content, _ := sc["content"].(string); res.IsError || content != base64.StdEncoding.EncodeToString(small) {
			t.Errorf("32 KiB attachment: %.300s", raw)
		}
		if text := resultText(res); len(text) > 16<<10 {
			t.Errorf("32 KiB attachment: the text content carries %d bytes too", len(text))
		}
	})
}

// TestBadInputMCPSchemasForAnAgent: the schemas say what the binder
// checks, the annotations are true, a throttled send is told about
// on_throttle "queue", and the scheduled_at hint's example is accepted.
func TestBadInputMCPSchemasForAnAgent(t *testing.T) {
	t.Parallel()
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
