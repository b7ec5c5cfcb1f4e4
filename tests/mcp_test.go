package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// MCP end to end: the built binary, a real SMTP server, the SDK's client;
// over streamable HTTP at /mcp, and over stdio through `nornweave mcp`
// pointing at the running server.

// mcpKey is the API_KEY of the servers below.
const mcpKey = "agent-key"

// startMCPServer runs the binary with the key, a limit of perMinute sends
// a minute, and blocked.test refused by the domain filter.
func startMCPServer(t *testing.T, driver string, perMinute int) (*proc, *smtptest.Server) {
	t.Helper()
	mx := smtptest.Start(t)
	return startProc(t, procEnv(t, driver, mx, "API_KEY="+mcpKey,
		"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE="+strconv.Itoa(perMinute), `OUTBOUND_DOMAIN_BLOCKLIST=blocked\.test`)), mx
}

// connectHTTP connects the SDK's streamable-HTTP client to url/mcp, with
// key as X-API-Key when not empty.
func connectHTTP(ctx context.Context, url, key string) (*mcp.ClientSession, error) {
	return mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: &http.Client{Transport: withKey{key}}}, nil)
}

type withKey struct{ key string }

func (k withKey) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-API-Key", k.key)
	}
	return http.DefaultTransport.RoundTrip(r)
}

// stdioProc is `nornweave mcp` running, with everything it wrote to
// stdout and stderr.
type stdioProc struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	exited         chan error
}

// startStdio runs `nornweave mcp` against url with key, and connects the
// SDK's client to its stdin and stdout, as an agent's client does.
func startStdio(t *testing.T, url, key string) (*mcp.ClientSession, *stdioProc, error) {
	t.Helper()
	cmd := exec.Command(nornweaveBinary(t), "mcp")
	cmd.Dir = t.TempDir()
	cmd.Env = append(cleanEnv(), "NORNWEAVE_API_URL="+url, "NORNWEAVE_API_KEY="+key)
	p := &stdioProc{cmd: cmd, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan error, 1)}
	cmd.Stderr = p.stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	startUntilCleanup(t, cmd, p.exited, "nornweave mcp stderr", p.stderr)
	// Everything read from stdout is kept, to check it is protocol only.
	transport := &mcp.IOTransport{Reader: io.NopCloser(io.TeeReader(stdout, p.stdout)), Writer: stdin}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(context.Background(), transport, nil)
	return cs, p, err
}

// protocolOnly fails unless every line of out is a JSON-RPC message.
func protocolOnly(t *testing.T, out string) {
	t.Helper()
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m.JSONRPC != "2.0" {
			t.Errorf("stdout line is not a JSON-RPC message: %q", sc.Text())
		}
	}
}

// agentScenario is what the issue asks of both transports: initialize and
// tools/list; a send arrives once at the SMTP server; a blocked domain is
// a refusal and sends nothing; the limit reached is a refusal with
// retry_after_seconds. The server's limit is 2 a minute.
func agentScenario(t *testing.T, cs *mcp.ClientSession, mx *smtptest.Server) {
	ctx := context.Background()
	init := cs.InitializeResult()
	if init.ServerInfo.Name != "nornweave" || !strings.Contains(init.Instructions, "get_rate_limit") {
		t.Errorf("initialize = %+v", init.ServerInfo)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	for _, want := range []string{"create_inbox", "list_inboxes", "send_email", "list_messages", "get_message",
		"search_email", "list_threads", "get_thread", "get_rate_limit", "send_email_with_attachments",
		"list_attachments", "get_attachment_content", "cancel_message"} {
		if !slices.Contains(names, want) {
			t.Errorf("tools/list lacks %s: %v", want, names)
		}
	}
	call := func(name string, args map[string]any) *mcp.CallToolResult {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return res
	}
	sc := func(res *mcp.CallToolResult) map[string]any { return res.StructuredContent.(map[string]any) }
	res := call("create_inbox", map[string]any{"name": "Agent", "username": "agent"})
	if res.IsError {
		t.Fatalf("create_inbox: %v", sc(res))
	}
	inbox := sc(res)["id"]
	send := func(to string) *mcp.CallToolResult {
		return call("send_email", map[string]any{"inbox_id": inbox, "to": []string{to},
			"subject": "Hello from MCP", "body": "Hi **there**", "idempotency_key": "k-" + to})
	}

	if res := send("ann@example.com"); res.IsError || sc(res)["status"] != "sent" {
		t.Fatalf("send_email = %v", sc(res))
	}
	mx.WaitForCount(t, 1)
	if m := mx.Messages()[0]; len(m.To) != 1 || m.To[0] != "ann@example.com" ||
		m.Header.Get("Subject") != "Hello from MCP" || !strings.Contains(m.HTML, "<strong>there</strong>") {
		t.Errorf("at the SMTP server: To %v Subject %q HTML %q", m.To, m.Header.Get("Subject"), m.HTML)
	}

	res = send("eve@blocked.test")
	if !res.IsError || sc(res)["code"] != "domain_blocked" {
		t.Errorf("blocked domain = %v, want a domain_blocked refusal", sc(res))
	}

	if res := send("bob@example.com"); res.IsError {
		t.Fatalf("second send = %v", sc(res))
	}
	res = send("cy@example.com")
	if !res.IsError || sc(res)["code"] != "rate_limited" || sc(res)["retry_after_seconds"].(float64) < 1 {
		t.Errorf("over the limit = %v, want rate_limited with retry_after_seconds", sc(res))
	}
	if text := res.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, "Try again in") {
		t.Errorf("the refusal's text does not say when to retry: %q", text)
	}
	if n := mx.Count(); n != 2 {
		t.Errorf("SMTP server got %d messages, want 2 (nothing for the blocked domain or over the limit)", n)
	}

	// Held sends (issue 19): over the limit with on_throttle queue, the
	// email is held, not refused; scheduled, it waits for its time, and
	// cancel_message stops it for good.
	res = call("send_email", map[string]any{"inbox_id": inbox, "to": []string{"dee@example.com"},
		"subject": "Queued", "body": "q", "on_throttle": "queue", "idempotency_key": "k-queued"})
	if res.IsError || sc(res)["status"] != "queued" || sc(res)["next_attempt_at"] == nil {
		t.Errorf("over the limit with on_throttle queue = %v, want status queued with next_attempt_at", sc(res))
	}
	// respond_async (issue 30): answered queued once recorded; sent in the
	// background when the windows allow.
	res = call("send_email", map[string]any{"inbox_id": inbox, "to": []string{"fay@example.com"},
		"subject": "Async", "body": "a", "respond_async": true, "idempotency_key": "k-async"})
	if res.IsError || sc(res)["status"] != "queued" {
		t.Errorf("send_email with respond_async = %v, want status queued", sc(res))
	}
	res = call("send_email", map[string]any{"inbox_id": inbox, "to": []string{"fay@example.com"},
		"subject": "Async", "body": "a", "respond_async": "yes"})
	if !res.IsError || !strings.Contains(fmt.Sprint(sc(res)), "respond_async") {
		t.Errorf("respond_async \"yes\" = %v, want a refusal naming it", sc(res))
	}
	at := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	res = call("send_email", map[string]any{"inbox_id": inbox, "to": []string{"eli@example.com"},
		"subject": "Later", "body": "l", "scheduled_at": at, "idempotency_key": "k-later"})
	if res.IsError || sc(res)["status"] != "scheduled" || sc(res)["scheduled_at"] == nil {
		t.Fatalf("send_email with scheduled_at = %v, want status scheduled", sc(res))
	}
	id := sc(res)["message_id"]
	if res := call("cancel_message", map[string]any{"message_id": id}); res.IsError || sc(res)["status"] != "canceled" {
		t.Errorf("cancel_message = %v, want status canceled", sc(res))
	}
	if res := call("cancel_message", map[string]any{"message_id": id}); !res.IsError || sc(res)["code"] != "not_cancelable" {
		t.Errorf("cancel_message again = %v, want a not_cancelable refusal", sc(res))
	}
	if res := call("get_message", map[string]any{"message_id": id}); res.IsError || sc(res)["status"] != "canceled" {
		t.Errorf("get_message after cancel = %v", sc(res))
	}
	if n := mx.Count(); n != 2 {
		t.Errorf("SMTP server got %d messages, want 2 (the queued one waits for its window, the canceled one never goes)", n)
	}
}

func TestMCPOverStreamableHTTP(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		p, mx := startMCPServer(t, driver, 2)
		cs, err := connectHTTP(context.Background(), p.URL, mcpKey)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		agentScenario(t, cs, mx)

		// No key: 401, in the API's shape, before any tool runs.
		res, err := http.Post(p.URL+"/mcp", "application/json", strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized || res.Header.Get("WWW-Authenticate") != "Bearer" ||
			!strings.Contains(string(body), `"code":"unauthorized"`) {
			t.Errorf("POST /mcp without the key = %d %s", res.StatusCode, body)
		}
		if _, err := connectHTTP(context.Background(), p.URL, ""); err == nil {
			t.Error("the SDK client connected without the key")
		}
	})
}

func TestMCPOverStdio(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		p, mx := startMCPServer(t, driver, 2)
		cs, stdio, err := startStdio(t, p.URL, mcpKey)
		if err != nil {
			t.Fatal(err)
		}
		agentScenario(t, cs, mx)
		cs.Close() // closes its stdin: the command ends, cleanly
		select {
		case err := <-stdio.exited:
			if err != nil {
				t.Errorf("nornweave mcp exited with %v after stdin closed", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("nornweave mcp still running 30 s after stdin closed")
		}
		protocolOnly(t, stdio.stdout.String())
		if !strings.Contains(stdio.stderr.String(), "serving MCP on stdio") {
			t.Errorf("stderr lacks the start-up line: %s", stdio.stderr.String())
		}

		// No key: the server's 401 ends the command at once, with what to
		// set, and stdout stays empty.
		_, noKey, err := startStdio(t, p.URL, "")
		if err == nil {
			t.Fatal("connected over stdio without the key")
		}
		<-noKey.exited
		if noKey.cmd.ProcessState.ExitCode() != 1 || noKey.stdout.String() != "" ||
			!strings.Contains(noKey.stderr.String(), "Unauthorized") || !strings.Contains(noKey.stderr.String(), "NORNWEAVE_API_KEY") {
			t.Errorf("without the key: exit %d, stdout %q, stderr %s", noKey.cmd.ProcessState.ExitCode(),
				noKey.stdout.String(), noKey.stderr.String())
		}
	})
}

// 200 agents' sends at once through /mcp against a limit of 20 a minute:
// exactly 20 reach the SMTP server, and every other call is a rate_limited
// refusal that says when to retry.
func TestMCPConcurrentSendsKeepTheLimit(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		const limit, calls = 20, 200
		p, mx := startMCPServer(t, driver, limit)
		ctx := context.Background()
		cs, err := connectHTTP(ctx, p.URL, mcpKey)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "create_inbox",
			Arguments: map[string]any{"name": "Agent", "username": "agent"}})
		if err != nil || res.IsError {
			t.Fatalf("create_inbox: %v %v", err, res)
		}
		inbox := res.StructuredContent.(map[string]any)["id"]

		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			outcomes = map[string]int{}
		)
		start := make(chan struct{})
		for i := range calls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "send_email", Arguments: map[string]any{
					"inbox_id": inbox, "to": []string{"ann@example.com"}, "subject": "Burst", "body": "b",
					"idempotency_key": "burst-" + strconv.Itoa(i)}})
				outcome := "sent"
				switch {
				case err != nil:
					outcome = "error: " + err.Error()
				case res.IsError:
					sc := res.StructuredContent.(map[string]any)
					outcome = sc["code"].(string)
					if ra, _ := sc["retry_after_seconds"].(float64); outcome == "rate_limited" && ra < 1 {
						outcome = "rate_limited without retry_after_seconds"
					}
				}
				mu.Lock()
				outcomes[outcome]++
				mu.Unlock()
			}()
		}
		close(start)
		wg.Wait()
		if outcomes["sent"] != limit || outcomes["rate_limited"] != calls-limit || len(outcomes) != 2 {
			t.Errorf("outcomes = %v, want %d sent and %d rate_limited", outcomes, limit, calls-limit)
		}
		if n := mx.Count(); n != limit {
			t.Errorf("SMTP server got %d messages, want exactly %d", n, limit)
		}
	})
}
