package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// The MCP tools over the SDK's in-memory transports, against the real
// pipeline (skuld.Sender with its filter and throttle) on a real SQLite
// store; only the provider is a fake that keeps what it is given. The
// end-to-end tests in tests/ run the same tools over HTTP and stdio
// against the binary and a real SMTP server.

// outbox is a provider that accepts every message and keeps it. With
// held set, each send first says so on held and waits for release.
type outbox struct {
	mu   sync.Mutex
	msgs []providers.Message

	held, release chan struct{}
}

func (o *outbox) Name() string { return "outbox" }

func (o *outbox) Send(_ context.Context, m providers.Message) (string, error) {
	if o.held != nil {
		o.held <- struct{}{}
		<-o.release
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.msgs = append(o.msgs, m)
	return fmt.Sprintf("outbox-%d", len(o.msgs)), nil
}

func (o *outbox) count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.msgs)
}

// toolMetrics records the tool calls reported.
type toolMetrics struct {
	nopMetrics
	mu    sync.Mutex
	calls []string // "tool outcome"
}

func (m *toolMetrics) ToolCall(tool, outcome string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = append(m.calls, tool+" "+outcome)
}

// mcpEnv is a client connected in memory to the MCP server of an API.
type mcpEnv struct {
	t       *testing.T
	cs      *sdk.ClientSession
	out     *outbox
	clock   *clocktest.Clock
	metrics *toolMetrics
	schemas map[string]*jsonschema.Resolved // each tool's output schema, as the client listed it
	srv     *api.Server                     // the API, for calls over HTTP
	mcp     *Server                         // its MCP server
	store   *store.Store
}

// perMinute is the global limit of the test API: small enough to reach.
const perMinute = 4

// newMCPEnv serves an API with a real store and sender, the domain filter
// refusing blocked.test and a limit of perMinute sends, to an SDK client.
func newMCPEnv(t *testing.T) *mcpEnv {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: "sqlite", DSN: filepath.Join(t.TempDir(), "mcp.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	clock := clocktest.New(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	th := throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: perMinute}, throttle.Limits{}), clock)
	policy, err := filter.New("", `blocked\.test`)
	if err != nil {
		t.Fatal(err)
	}
	env := &mcpEnv{t: t, out: &outbox{}, clock: clock, metrics: &toolMetrics{}, store: st}
	sender := skuld.NewSender(skuld.Options{Store: st, Provider: env.out, Throttle: th, Filter: policy, Clock: clock})
	o := api.Options{Store: st, Sender: sender, Throttle: th, Clock: clock, Metrics: env.metrics,
		EmailDomain: "acme.test", AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20,
		AttachmentMaxCount: 2, Version: "test"}
	s := withMCP(&o)
	env.srv = api.New(o)
	env.mcp = *s
	env.cs = connectInMemory(t, env.mcp.sdk)
	env.schemas = outputSchemas(t, env.cs)
	return env
}

// connectInMemory connects an SDK client to s over the in-memory transports.
func connectInMemory(t *testing.T, s *sdk.Server) *sdk.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := sdk.NewInMemoryTransports()
	ss, err := s.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Wait() })
	return cs
}

// outputSchemas lists the tools and resolves each one's output schema.
func outputSchemas(t *testing.T, cs *sdk.ClientSession) map[string]*jsonschema.Resolved {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*jsonschema.Resolved{}
	for _, tool := range res.Tools {
		var s jsonschema.Schema
		if err := remarshal(tool.OutputSchema, &s); err != nil {
			t.Fatalf("%s: output schema: %v", tool.Name, err)
		}
		if out[tool.Name], err = s.Resolve(nil); err != nil {
			t.Fatalf("%s: output schema does not resolve: %v", tool.Name, err)
		}
	}
	return out
}

func remarshal(from, to any) error {
	b, err := json.Marshal(from)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, to)
}

// call calls a tool and checks its structuredContent against the tool's
// output schema, as a client that validates results does, refusals
// included.
func (e *mcpEnv) call(name string, args map[string]any) *sdk.CallToolResult {
	e.t.Helper()
	res, err := e.cs.CallTool(context.Background(), &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		e.t.Fatalf("%s: protocol error %v; a refusal must be a result", name, err)
	}
	if res.StructuredContent == nil {
		e.t.Fatalf("%s: no structuredContent", name)
	}
	if err := e.schemas[name].Validate(res.StructuredContent); err != nil {
		e.t.Errorf("%s: structuredContent does not match its output schema: %v\n%v", name, err, res.StructuredContent)
	}
	if len(res.Content) == 0 || res.Content[0].(*sdk.TextContent).Text == "" {
		e.t.Errorf("%s: no text content", name)
	}
	return res
}

// ok calls a tool that must succeed and returns its structuredContent.
func (e *mcpEnv) ok(name string, args map[string]any) map[string]any {
	e.t.Helper()
	res := e.call(name, args)
	if res.IsError {
		e.t.Fatalf("%s(%v) refused: %s", name, args, text(res))
	}
	return res.StructuredContent.(map[string]any)
}

// refused calls a tool that must refuse and returns the refusal.
func (e *mcpEnv) refused(name string, args map[string]any) (toolRefusal, string) {
	e.t.Helper()
	res := e.call(name, args)
	if !res.IsError {
		e.t.Fatalf("%s(%v) = %v, want a refusal", name, args, res.StructuredContent)
	}
	var r toolRefusal
	if err := remarshal(res.StructuredContent, &r); err != nil {
		e.t.Fatal(err)
	}
	return r, text(res)
}

func text(res *sdk.CallToolResult) string { return res.Content[0].(*sdk.TextContent).Text }

func TestMCPListsTheToolsWithSchemas(t *testing.T) {
	e := newMCPEnv(t)
	res, err := e.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("%s: description, input schema and output schema are all required", tool.Name)
		}
		// Portable to clients with a single-type dialect (the Inspector's
		// --strict check): no type lists, no bare true for a schema.
		for _, schema := range []any{tool.InputSchema, tool.OutputSchema} {
			b, _ := json.Marshal(schema)
			if js := string(b); strings.Contains(js, `"type":[`) || strings.Contains(js, `"items":true`) {
				t.Errorf("%s: schema not portable: %s", tool.Name, js)
			}
		}
	}
	want := []string{"cancel_message", "create_inbox", "get_attachment_content", "get_message", "get_rate_limit", "get_thread",
		"list_attachments", "list_inboxes", "list_messages", "list_suppressions", "list_threads", "remove_suppression",
		"search_email", "send_email", "send_email_with_attachments"}
	if slices.Sort(names); !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	instructions := e.cs.InitializeResult().Instructions
	for _, s := range []string{"get_rate_limit", "idempotency_key", "retry_after_seconds", "remaining"} {
		if !strings.Contains(instructions, s) {
			t.Errorf("server instructions do not mention %s", s)
		}
	}
	for _, tool := range res.Tools {
		if tool.Name == "send_email" && (!strings.Contains(tool.Description, "idempotency_key") ||
			!strings.Contains(tool.Description, "throttled")) {
			t.Errorf("send_email's description does not teach pacing: %s", tool.Description)
		}
	}
}

// Every tool, in the order an agent would use them, on one inbox.
func TestMCPEveryToolWorks(t *testing.T) {
	e := newMCPEnv(t)
	inbox := e.ok("create_inbox", map[string]any{"name": "Support", "username": "support"})
	if inbox["email_address"] != "support@acme.test" {
		t.Fatalf("create_inbox = %v", inbox)
	}
	id := inbox["id"].(string)
	if l := e.ok("list_inboxes", nil); l["count"] != 1.0 || l["items"].([]any)[0].(map[string]any)["id"] != id {
		t.Errorf("list_inboxes = %v", l)
	}

	sent := e.ok("send_email", map[string]any{"inbox_id": id, "to": []string{"ann@example.com"},
		"subject": "Your order", "body": "It **shipped**."})
	if sent["status"] != "sent" || sent["replayed"] != false {
		t.Fatalf("send_email = %v", sent)
	}
	rl := sent["rate_limit"].(map[string]any)
	if rl["window"] != "per-minute" || rl["limit"] != float64(perMinute) || rl["remaining"] != float64(perMinute-1) {
		t.Errorf("send_email rate_limit = %v, want per-minute with %d left", rl, perMinute-1)
	}
	thread := sent["thread_id"].(string)
	e.clock.Advance(time.Second)
	// recipient is the Python tool's single address; thread_id replies.
	reply := e.ok("send_email", map[string]any{"inbox_id": id, "recipient": "ann@example.com",
		"subject": "Re: Your order", "body": "Tracking: 42", "thread_id": thread})
	if reply["thread_id"] != thread {
		t.Errorf("reply thread = %v, want %s", reply["thread_id"], thread)
	}
	if n := e.out.count(); n != 2 {
		t.Fatalf("provider got %d messages, want 2", n)
	}
	if to := e.out.msgs[1].To; len(to) != 1 || to[0].String() != "ann@example.com" {
		t.Errorf("recipient went out as To %v", to)
	}

	for _, args := range []map[string]any{{"inbox_id": id}, {"thread_id": thread}} {
		l := e.ok("list_messages", args)
		if l["count"] != 2.0 || l["total"] != 2.0 {
			t.Errorf("list_messages(%v) = count %v total %v, want 2", args, l["count"], l["total"])
		}
	}
	msg := e.ok("get_message", map[string]any{"message_id": sent["message_id"]})
	if msg["subject"] != "Your order" || msg["text"] != "It **shipped**." || !strings.Contains(msg["html"].(string), "<strong>shipped</strong>") {
		t.Errorf("get_message = %v", msg)
	}
	// A message that went out cannot be canceled; the held ones (issue 19)
	// are canceled end to end in tests/mcp_test.go.
	if r, _ := e.refused("cancel_message", map[string]any{"message_id": sent["message_id"]}); r.Code != "not_cancelable" {
		t.Errorf("cancel_message of a sent message = %+v, want not_cancelable", r)
	}
	if r, _ := e.refused("cancel_message", map[string]any{"message_id": "nonexistent"}); r.Code != "not_found" {
		t.Errorf("cancel_message of no message = %+v, want not_found", r)
	}
	for _, args := range []map[string]any{{"query": "tracking", "inbox_id": id}, {"query": "TRACKING", "thread_id": thread}} {
		s := e.ok("search_email", args)
		if s["count"] != 1.0 || s["items"].([]any)[0].(map[string]any)["id"] != reply["message_id"] {
			t.Errorf("search_email(%v) = %v", args, s)
		}
	}
	if l := e.ok("list_threads", map[string]any{"inbox_id": id}); l["count"] != 1.0 {
		t.Errorf("list_threads = %v", l)
	}

	res := e.call("get_thread", map[string]any{"thread_id": thread})
	v := res.StructuredContent.(map[string]any)
	md := v["markdown"].(string)
	if text(res) != md || !strings.HasPrefix(md, "# Your order\n") || !strings.Contains(md, "It **shipped**.") ||
		!strings.Contains(md, "**To:** ann@example.com") || strings.Index(md, "shipped") > strings.Index(md, "Tracking") {
		t.Errorf("get_thread's Markdown (also its text) is not the conversation, oldest first:\n%s", md)
	}
	if msgs := v["messages"].([]any); len(msgs) != 2 || msgs[0].(map[string]any)["role"] != "assistant" {
		t.Errorf("get_thread messages = %v", msgs)
	}

	g := e.ok("get_rate_limit", nil)
	if pm := g["per_minute"].(map[string]any); pm["limit"] != float64(perMinute) || pm["used"] != 2.0 ||
		pm["remaining"] != float64(perMinute-2) || pm["in_flight"] != 0.0 {
		t.Errorf("get_rate_limit per_minute = %v", pm)
	}
	if g["inbox"] != nil || g["per_hour"].(map[string]any)["limit"] != 0.0 {
		t.Errorf("get_rate_limit without inbox_id = %v", g)
	}
	g = e.ok("get_rate_limit", map[string]any{"inbox_id": id})
	if g["inbox"].(map[string]any)["per_minute"].(map[string]any)["limit"] != 0.0 {
		t.Errorf("get_rate_limit inbox = %v", g["inbox"])
	}
}

// Each tool's input schema and its binder agree: every property the
// schema declares is read (none is refused as extra), and anything else
// is refused.
func TestMCPInputSchemasMatchTheBinders(t *testing.T) {
	e := newMCPEnv(t)
	res, err := e.cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		var s jsonschema.Schema
		if err := remarshal(tool.InputSchema, &s); err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"not_an_argument": true}
		for name := range s.Properties {
			args[name] = nil // declared, so never "extra", whatever the value
		}
		r, _ := e.refused(tool.Name, args)
		var extra []string
		for _, fe := range r.Errors {
			if fe.Type == "extra_forbidden" {
				extra = append(extra, fmt.Sprint(fe.Loc[1]))
			}
		}
		if !slices.Equal(extra, []string{"not_an_argument"}) {
			t.Errorf("%s: refused as extra %v, want only not_an_argument (schema: %v)", tool.Name, extra, args)
		}
	}
}

// The attachment tools: a file sent with send_email_with_attachments is
// listed by message, thread and inbox, described by get_message, and read
// back byte for byte by get_attachment_content.
func TestMCPAttachmentTools(t *testing.T) {
	e := newMCPEnv(t)
	id := e.ok("create_inbox", map[string]any{"name": "Support", "username": "support"})["id"].(string)
	pdf := []byte("%PDF-1.7\x00\xff\xfe binary \r\n")
	sent := e.ok("send_email_with_attachments", map[string]any{"inbox_id": id, "recipient": "ann@example.com",
		"subject": "Invoice", "body": "Attached.", "idempotency_key": "inv-1",
		"attachments": []map[string]any{{"filename": "invoice.pdf", "content_type": "application/pdf",
			"content": base64.StdEncoding.EncodeToString(pdf)}}})
	if sent["status"] != "sent" {
		t.Fatalf("send_email_with_attachments = %v", sent)
	}
	if n := e.out.count(); n != 1 || len(e.out.msgs[0].Attachments) != 1 ||
		string(e.out.msgs[0].Attachments[0].Content) != string(pdf) || e.out.msgs[0].Attachments[0].Filename != "invoice.pdf" {
		t.Fatalf("provider got %d messages, attachments %+v", n, e.out.msgs)
	}

	msg := e.ok("get_message", map[string]any{"message_id": sent["message_id"]})
	atts := msg["attachments"].([]any)
	if len(atts) != 1 {
		t.Fatalf("get_message attachments = %v", msg["attachments"])
	}
	att := atts[0].(map[string]any)
	if att["filename"] != "invoice.pdf" || att["content_type"] != "application/pdf" || att["size"] != float64(len(pdf)) {
		t.Errorf("get_message attachment = %v", att)
	}
	for _, args := range []map[string]any{{"message_id": sent["message_id"]}, {"thread_id": sent["thread_id"]},
		{"inbox_id": id, "limit": 5}} {
		l := e.ok("list_attachments", args)
		if l["count"] != 1.0 || l["items"].([]any)[0].(map[string]any)["id"] != att["id"] {
			t.Errorf("list_attachments(%v) = %v", args, l)
		}
	}
	got := e.ok("get_attachment_content", map[string]any{"attachment_id": att["id"]})
	if got["filename"] != "invoice.pdf" || got["content_type"] != "application/pdf" ||
		got["content"] != base64.StdEncoding.EncodeToString(pdf) {
		t.Errorf("get_attachment_content = %v", got)
	}

	// Refusals, each with the argument at fault.
	for _, tt := range []struct {
		tool string
		args map[string]any
		code string
		loc  string
	}{
		{"list_attachments", nil, "validation_error", "[arguments message_id]"},
		{"list_attachments", map[string]any{"message_id": "m", "inbox_id": id}, "validation_error", "[arguments inbox_id]"},
		{"list_attachments", map[string]any{"inbox_id": id, "limit": 501}, "validation_error", "[arguments limit]"},
		{"get_attachment_content", nil, "validation_error", "[arguments attachment_id]"},
		{"send_email_with_attachments", map[string]any{"inbox_id": id, "to": []string{"a@example.com"},
			"subject": "s", "body": "b"}, "validation_error", "[arguments attachments]"},
		{"send_email_with_attachments", map[string]any{"inbox_id": id, "to": []string{"a@example.com"},
			"subject": "s", "body": "b", "attachments": []any{}}, "validation_error", "[arguments attachments]"},
		{"send_email_with_attachments", map[string]any{"inbox_id": id, "to": []string{"a@example.com"},
			"subject": "s", "body": "b", "attachments": []map[string]any{{"filename": "a.txt",
				"content_type": "text/plain"}}}, "validation_error", "[arguments attachments 0 content]"},
		{"send_email_with_attachments", map[string]any{"inbox_id": id, "to": []string{"a@example.com"},
			"subject": "s", "body": "b", "attachments": []map[string]any{{"filename": "a.txt",
				"content_type": "text/plain", "content_base64": "eA=="}}}, "validation_error",
			"[arguments attachments 0 content_base64]"},
		{"send_email", map[string]any{"inbox_id": id, "to": []string{"a@example.com"}, "subject": "s", "body": "b",
			"attachments": []map[string]any{{"filename": "a.txt", "content_type": "text/plain", "content": "eA=="}}},
			"validation_error", "[arguments attachments]"},
	} {
		r, _ := e.refused(tt.tool, tt.args)
		var locs []string
		for _, fe := range r.Errors {
			locs = append(locs, fmt.Sprint(fe.Loc))
		}
		if r.Code != tt.code || !slices.Contains(locs, tt.loc) {
			t.Errorf("%s(%v) = %+v, want %s at %s", tt.tool, tt.args, r, tt.code, tt.loc)
		}
	}
	for _, tt := range []struct {
		tool   string
		args   map[string]any
		detail string
	}{
		{"get_attachment_content", map[string]any{"attachment_id": "nonexistent"}, "Attachment nonexistent not found"},
		{"list_attachments", map[string]any{"thread_id": "nonexistent"}, "Thread nonexistent not found"},
		{"list_attachments", map[string]any{"message_id": "nonexistent"}, "Message nonexistent not found"},
	} {
		if r, _ := e.refused(tt.tool, tt.args); r.Code != "not_found" || r.Detail != tt.detail {
			t.Errorf("%s(%v) = %+v, want not_found %q", tt.tool, tt.args, r, tt.detail)
		}
	}
	bad := map[string]any{"inbox_id": id, "to": []string{"a@example.com"}, "subject": "s", "body": "b",
		"attachments": []map[string]any{{"filename": "a.txt", "content_type": "text/plain", "content": "not base64!"}}}
	if r, _ := e.refused("send_email_with_attachments", bad); r.Code != "invalid_base64" {
		t.Errorf("bad base64 = %+v", r)
	}
	if n := e.out.count(); n != 1 {
		t.Errorf("provider got %d messages after the refusals, want 1", n)
	}
}
