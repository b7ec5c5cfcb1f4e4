// Package mcpstdio is `nornweave mcp`: MCP over stdio for clients that
// launch a command (Claude Desktop, Cursor, Codex), as a client of a
// running NornWeave server. It mirrors the server's /mcp — its
// instructions, tools and resource templates, read from the server at
// start — and forwards every call there with the SDK's streamable-HTTP
// client. Nothing is decided here: the tools, their schemas, the send
// pipeline and the throttle stay in the server, so an agent on stdio and
// one on HTTP meet the same limits, and a tool added to the server (a
// later issue's cancel_message) appears on stdio with no change here.
//
// Only protocol messages are written to Out; the logger (stderr) gets the
// rest.
package mcpstdio

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/core/logging"
)

// Options configures Serve.
type Options struct {
	// Endpoint is the server's MCP endpoint, "http://localhost:8000/mcp".
	Endpoint string
	// APIKey, when set, is sent as X-API-Key.
	APIKey string
	// In and Out are the client's end: stdin and stdout.
	In  io.ReadCloser
	Out io.WriteCloser
	// Logger receives what is not a protocol message; nil discards it.
	Logger *slog.Logger
	// Version names this build in the client it presents to the server.
	Version string
}

// Serve connects to the server, mirrors it on In/Out, and forwards until
// the client closes In or ctx ends. It fails at once if the server cannot
// be reached or refuses the key: a client that launches the command shows
// that error, where a mirror without tools would only puzzle it.
func Serve(ctx context.Context, o Options) error {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	up := &upstream{o: o, key: &keyTransport{key: o.APIKey}}
	cs, err := up.session(ctx)
	if err != nil && up.key.refused.Load() {
		return fmt.Errorf("the NornWeave server at %s answered 401 Unauthorized: the API key is wrong or missing (set "+
			"NORNWEAVE_API_KEY to the server's API_KEY)", o.Endpoint)
	}
	if err != nil {
		return fmt.Errorf("cannot reach the NornWeave server at %s (start it, or set NORNWEAVE_API_URL "+
			"and NORNWEAVE_API_KEY): %w", o.Endpoint, err)
	}
	defer up.close()
	info := cs.InitializeResult()
	s := mcp.NewServer(info.ServerInfo, &mcp.ServerOptions{Instructions: info.Instructions,
		Logger:       logging.AtLeast(o.Logger, slog.LevelWarn), // not the SDK's connection lines
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}, Resources: &mcp.ResourceCapabilities{}}})
	tools := 0
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the server's tools: %w", err)
		}
		s.AddTool(t, up.forwardTool(t.Name))
		tools++
	}
	for rt, err := range cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list the server's resources: %w", err)
		}
		s.AddResourceTemplate(rt, up.forwardResource)
	}
	o.Logger.Info("serving MCP on stdio", slog.String("server", o.Endpoint),
		slog.String("server_version", info.ServerInfo.Version), slog.Int("tools", tools))
	out := &lockedWriter{w: o.Out}
	ss, err := s.Connect(ctx, &mcp.IOTransport{Reader: filterLines(o.In, out), Writer: out}, nil)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { ss.Close() })
	defer stop()
	err = ss.Wait()
	if errors.Is(err, io.EOF) || ctx.Err() != nil {
		return nil // the client closed stdin, or we were told to stop
	}
	return err
}

// upstream is the session with the server. The server is stateless, so a
// session that broke (the server restarted, the network dropped) is
// replaced by a new one at the next call. It is safe for concurrent use.
type upstream struct {
	o   Options
	key *keyTransport

	mu sync.Mutex
	cs *mcp.ClientSession
}

// session returns the current session, connecting if there is none.
func (u *upstream) session(ctx context.Context) (*mcp.ClientSession, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		return u.cs, nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "nornweave-mcp-stdio", Version: u.o.Version}, nil)
	transport := &mcp.StreamableClientTransport{Endpoint: u.o.Endpoint,
		HTTPClient: &http.Client{Transport: u.key},
		// The server never calls the client: no standing GET stream.
		DisableStandaloneSSE: true}
	cs, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, err
	}
	u.cs = cs
	return cs, nil
}

// drop forgets cs after a failure, so the next call connects afresh.
func (u *upstream) drop(cs *mcp.ClientSession) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs == cs {
		u.cs = nil
		go cs.Close()
	}
}

func (u *upstream) close() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.cs != nil {
		u.cs.Close()
		u.cs = nil
	}
}

// forwardTool calls the server's tool of that name with the arguments as
// they came. The server's answer, refusals included, is passed on as it
// is; no answer at all becomes a refusal the model can act on.
func (u *upstream) forwardTool(name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		cs, err := u.session(ctx)
		if err != nil {
			return unreachable(u.o.Endpoint, err), nil
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments,
			Meta: req.Params.Meta})
		if rpc, ok := answered(err); ok {
			return nil, rpc // a protocol error, passed on
		}
		if err != nil && u.key.refused.Load() {
			return wrongKey(u.o.Endpoint), nil
		}
		if err != nil {
			u.drop(cs)
			return unreachable(u.o.Endpoint, err), nil
		}
		return res, nil
	}
}

// forwardResource reads the resource from the server.
func (u *upstream) forwardResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	cs, err := u.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := cs.ReadResource(ctx, req.Params)
	if _, ok := answered(err); err != nil && !ok {
		u.drop(cs)
	}
	return res, err
}

// codeRejected is the SDK's code for a message its transport could not
// deliver (jsonrpc2.ErrRejected, internal to the SDK): no answer.
const codeRejected = -32005

// answered reports whether err is a JSON-RPC error the server sent, as
// opposed to the transport's failing to reach it.
func answered(err error) (*jsonrpc.Error, bool) {
	var rpc *jsonrpc.Error
	return rpc, errors.As(err, &rpc) && rpc.Code != codeRejected
}

// unreachableRetry is when a call that met no server is worth trying
// again: about a restart.
const unreachableRetry = 5

// unreachable is the refusal for a call the server did not answer, in the
// server's refusal shape. A send may have gone out before the answer was
// lost, so the model is told to retry with the same idempotency_key.
func unreachable(endpoint string, err error) *mcp.CallToolResult {
	detail := fmt.Sprintf("No answer from the NornWeave server at %s: %v", endpoint, err)
	return &mcp.CallToolResult{IsError: true,
		StructuredContent: map[string]any{"code": "server_unreachable", "detail": detail,
			"retry_after_seconds": unreachableRetry},
		Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s. Try again in %d seconds; if this was "+
			"send_email, it may have been sent, so retry with the same idempotency_key.", detail, unreachableRetry)}}}
}

// wrongKey is the refusal for a call the server answered 401.
func wrongKey(endpoint string) *mcp.CallToolResult {
	detail := fmt.Sprintf("The NornWeave server at %s refused the API key (401)", endpoint)
	return &mcp.CallToolResult{IsError: true,
		StructuredContent: map[string]any{"code": "unauthorized", "detail": detail},
		Content: []mcp.Content{&mcp.TextContent{Text: detail + ": NORNWEAVE_API_KEY must be the server's " +
			"API_KEY. Retrying will not help; ask the operator."}}}
}

// keyTransport sends the API key with every request, and notes whether the
// server refused it, so that a 401 is not reported as a server that cannot
// be reached.
type keyTransport struct {
	key     string
	refused atomic.Bool // the last answer was a 401
}

func (k *keyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if k.key != "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-API-Key", k.key)
	}
	res, err := http.DefaultTransport.RoundTrip(r)
	if err == nil {
		k.refused.Store(res.StatusCode == http.StatusUnauthorized)
	}
	return res, err
}
