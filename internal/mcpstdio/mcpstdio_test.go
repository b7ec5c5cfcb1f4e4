package mcpstdio

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// upstreamServer is a stand-in for NornWeave's /mcp: one tool that
// answers, one that refuses, one resource template, behind an API key;
// down makes it drop every connection, as a server that went away.
type upstreamServer struct {
	*httptest.Server
	down  atomic.Bool
	calls atomic.Int64
}

func startUpstream(t *testing.T) *upstreamServer {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "nornweave", Version: "9.9"},
		&mcp.ServerOptions{Instructions: "pace your sends"})
	u := &upstreamServer{}
	type echoArgs struct {
		Text string `json:"text"`
	}
	type echoOut struct {
		Echo string `json:"echo"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "echoes"},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, echoOut, error) {
			u.calls.Add(1)
			return nil, echoOut{Echo: in.Text}, nil
		})
	s.AddTool(&mcp.Tool{Name: "refuse", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, StructuredContent: map[string]any{"code": "rate_limited",
				"detail": "full", "retry_after_seconds": 12}, Content: []mcp.Content{&mcp.TextContent{Text: "wait 12 s"}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{Name: "thread", URITemplate: "email://thread/{id}"},
		func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: "# Hello"}}}, nil
		})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
	u.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u.down.Load() {
			panic(http.ErrAbortHandler)
		}
		if r.Header.Get("X-API-Key") != "key" {
			http.Error(w, `{"detail":"Missing or invalid API key"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.Close)
	return u
}

// stdio runs Serve on pipes and connects an SDK client to their other
// ends, as the agent's client does to the process's stdin and stdout.
func stdio(t *testing.T, o Options) (*mcp.ClientSession, <-chan error) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	o.In, o.Out = inR, outW
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, o); outW.Close() }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).
		Connect(ctx, &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		cancel()
		t.Fatalf("connect over stdio: %v (Serve: %v)", err, <-done)
	}
	t.Cleanup(func() {
		cs.Close()
		cancel()
		<-done
	})
	return cs, done
}

func TestMirrorsAndForwards(t *testing.T) {
	up := startUpstream(t)
	cs, _ := stdio(t, Options{Endpoint: up.URL, APIKey: "key", Version: "test"})
	ctx := context.Background()

	if got := cs.InitializeResult(); got.Instructions != "pace your sends" || got.ServerInfo.Name != "nornweave" ||
		got.ServerInfo.Version != "9.9" {
		t.Errorf("initialize = %+v, want the server's instructions and name", got)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		if tool.Name == "echo" && tool.OutputSchema == nil {
			t.Error("echo lost its output schema on the way")
		}
	}
	if strings.Join(names, ",") != "echo,refuse" {
		t.Errorf("tools = %v, want the server's", names)
	}

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["echo"] != "hi" {
		t.Fatalf("echo = %+v, %v", res, err)
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "refuse"})
	if err != nil || !res.IsError || res.StructuredContent.(map[string]any)["retry_after_seconds"] != 12.0 ||
		res.Content[0].(*mcp.TextContent).Text != "wait 12 s" {
		t.Errorf("a refusal is passed on as it is: %+v, %v", res, err)
	}
	read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "email://thread/t1"})
	if err != nil || read.Contents[0].Text != "# Hello" {
		t.Errorf("resource = %+v, %v", read, err)
	}
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nonexistent"}); err == nil {
		t.Error("an unknown tool should be a protocol error")
	}
}

// A call the server does not answer is a refusal the model can act on,
// and the next call, once the server is back, goes through.
func TestServerGoneAndBack(t *testing.T) {
	up := startUpstream(t)
	cs, _ := stdio(t, Options{Endpoint: up.URL, APIKey: "key"})
	ctx := context.Background()
	up.down.Store(true)
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}})
	if err != nil || !res.IsError {
		t.Fatalf("call to a server that is gone = %+v, %v; want a refusal", res, err)
	}
	sc := res.StructuredContent.(map[string]any)
	text := res.Content[0].(*mcp.TextContent).Text
	if sc["code"] != "server_unreachable" || sc["retry_after_seconds"] != 5.0 || !strings.Contains(text, "idempotency_key") {
		t.Errorf("refusal = %v %q", sc, text)
	}
	up.down.Store(false)
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "back"}})
	if err != nil || res.IsError || res.StructuredContent.(map[string]any)["echo"] != "back" {
		t.Errorf("call after the server came back = %+v, %v", res, err)
	}
}

// Without the server, or with the wrong key, Serve fails at once with
// what to do (a server that answered 401 is not one it cannot reach); it
// writes nothing to stdout.
func TestFailsFastWithoutTheServer(t *testing.T) {
	up := startUpstream(t)
	for _, tt := range []struct {
		name     string
		endpoint string
		key      string
		want     string
	}{
		{"wrong key", up.URL, "nope", "answered 401 Unauthorized: the API key is wrong or missing (set NORNWEAVE_API_KEY"},
		{"no server", "http://127.0.0.1:1/mcp", "key", "cannot reach the NornWeave server"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := Serve(context.Background(), Options{Endpoint: tt.endpoint, APIKey: tt.key,
				In: io.NopCloser(strings.NewReader("")), Out: nopWriteCloser{&out}})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one saying %q", err, tt.want)
			}
			if out.Len() != 0 {
				t.Errorf("stdout = %q, want nothing", out.String())
			}
		})
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
