// Package mcp is the MCP face of the API: the same operations the REST
// handlers call (api.API's exported ones), as tools and resources an agent
// discovers and calls. It is served at /mcp (streamable HTTP) behind the
// same middleware as /v1 — the API key, the cross-site check, the body
// limit, the access log — and `nornweave mcp` forwards stdio to it, so
// every agent's send meets this server's pipeline and throttle.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	"github.com/labstack/echo/v4"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/logging"
)

// mcpInstructions is what a client gives the model about the server as a
// whole: what it is for and how to pace sends.
const mcpInstructions = `NornWeave sends email from inboxes on a server its operator controls.
Find an inbox with list_inboxes (or make one with create_inbox), send with send_email (files:
send_email_with_attachments), and read what was sent with list_threads, get_thread, list_messages,
get_message and search_email (files: list_attachments, get_attachment_content).

Sending is throttled: the server accepts a fixed number of sends per minute and per hour, for all
inboxes together and for each inbox. Before sending several emails, call get_rate_limit with the
inbox_id: in each window, "remaining" is how many more sends are accepted now and "reset_seconds"
is how long until the next slot frees; a window with "limit": 0 is unlimited. Pace the sends to
fit. Every send_email result also reports its tightest window in "rate_limit".

Give every send_email an idempotency_key (any unique string, e.g. a UUID, one per intended email)
and reuse it when you retry that email: the server never sends the same key twice; a repeat of a
send that went out returns the first result with "replayed": true.

A refused call is a result with isError true and structuredContent {code, detail,
retry_after_seconds?, violated?}. rate_limited: nothing was sent; wait retry_after_seconds, then
retry with the same idempotency_key (retrying sooner is refused again). domain_blocked: the
server's policy refuses a recipient's domain; retrying will not help. recipient_suppressed: a
recipient bounced or complained before (see list_suppressions); send without it. too_many_recipients:
the server counts recipients and the email has more than a window allows in all; split it.
not_found: check the id.
validation_error: fix the arguments named in "errors".`

// Server is the MCP server of one API: every tool of tools, and the
// resources. One server serves every session; it holds no per-client
// state. Safe for concurrent use.
type Server struct {
	api *api.API
	sdk *sdk.Server
	// take is api.TakeInFlight, which an answer's memory is taken from
	// (chargeAnswer); a test counts what is held through it.
	take func(ctx context.Context, n int64) (release func(), err error)
}

// New builds the MCP server of a.
func New(a *api.API) *Server {
	s := &Server{api: a, take: a.TakeInFlight}
	s.sdk = sdk.NewServer(&sdk.Implementation{Name: "nornweave", Title: "NornWeave", Version: a.Version},
		&sdk.ServerOptions{
			Instructions: mcpInstructions,
			// The SDK logs each connection at INFO (in stateless HTTP,
			// each request): only its warnings and errors are ours.
			Logger: logging.AtLeast(a.Logger, slog.LevelWarn),
			// No logging capability, and nothing changes at run time.
			Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{},
				Resources: &sdk.ResourceCapabilities{}},
		})
	for _, t := range s.tools() {
		s.sdk.AddTool(t.def, s.toolHandler(t))
	}
	s.addResources()
	return s
}

// Handler is New(a).Handler(): what api.Options.MCP takes.
func Handler(a *api.API) echo.HandlerFunc { return New(a).Handler() }

// Handler is /mcp: streamable HTTP, stateless. Each POST is complete in
// itself (no Mcp-Session-Id), so a client may reach any of several servers
// behind a balancer, a restart loses nothing, and the server keeps no
// session to expire; the tools never call back to the client, which is
// what sessions would be for. Answers are plain JSON, not event streams.
//
// The SDK's own Host check (loopback listener ⇒ loopback Host) is off: the
// API's Host rules live in the middleware chain that /mcp shares with /v1,
// and the SDK's narrower rule would refuse what those allow (a reverse
// proxy on loopback forwarding its public name). Cross-origin requests meet
// the API's crossSite check, as on /v1. The SDK's body limit is the API's.
func (s *Server) Handler() echo.HandlerFunc {
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s.sdk },
		&sdk.StreamableHTTPOptions{
			Stateless:                    true,
			JSONResponse:                 true,
			Logger:                       logging.AtLeast(s.api.Logger, slog.LevelWarn),
			DisableLocalhostProtection:   true,
			MaxRequestBodyBytes:          s.api.BodyLimit(),
			PropagateRequestCancellation: true,
		})
	return func(c echo.Context) error { return s.serveMCP(c, h) }
}

// mcpTool is one tool: its definition (name, description, schemas) and
// what it does with its arguments. Arguments are read by the same JSON
// binder as a REST body (api.Args), so a tool validates exactly as its route
// does; the input schema tells the model the same rules.
type mcpTool struct {
	def *sdk.Tool
	run func(ctx context.Context, args api.Args) (any, error)
}

// toolText is a result whose text content is not its JSON (get_thread's
// Markdown).
type toolText interface{ toolText() string }

// toolHandler runs t and turns its outcome into a tool result: a success's
// structuredContent and its JSON (or toolText) as text, or a refusal
// (isError) with the same code the REST API gives for the same error.
// Every call is counted by tool and outcome.
func (s *Server) toolHandler(t mcpTool) sdk.ToolHandler {
	name := t.def.Name
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		out, body, err := s.runTool(ctx, t, req.Params.Arguments)
		if err != nil {
			p := s.api.Classify(ctx, err, slog.String("tool", name))
			s.api.Metrics.ToolCall(name, p.Code)
			return refusalResult(p), nil
		}
		if err := s.answerFits(ctx, body); err != nil {
			p := s.api.Classify(ctx, err, slog.String("tool", name))
			s.api.Metrics.ToolCall(name, p.Code)
			return refusalResult(p), nil
		}
		text := body
		if tt, ok := out.(toolText); ok {
			text = tt.toolText()
		}
		if len(text) > maxInlineText {
			text = fmt.Sprintf("The result is in structuredContent (%d bytes of JSON).", len(body))
			if _, ok := out.(toolText); ok {
				text = fmt.Sprintf("The result is in structuredContent (%d bytes of JSON); its markdown "+
					"field is the conversation to read.", len(body))
			}
		}
		s.api.Metrics.ToolCall(name, "ok")
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}},
			StructuredContent: json.RawMessage(body)}, nil
	}
}

// answerFits refuses a result over maxResult (the lists are cut to
// fit before they are encoded; this is the bound for the rest) and takes
// the answer's memory from the in-flight budget until it is written.
func (s *Server) answerFits(ctx context.Context, body string) error {
	n := wireSize(body)
	if int64(n) > s.maxResult()+pageEnvelope {
		return api.NewError(http.StatusRequestEntityTooLarge, "result_too_large", fmt.Sprintf(
			"The result is %d bytes of JSON, more than a tool answers (%s); read it from the REST API",
			n, sizeText(s.maxResult())))
	}
	return s.chargeAnswer(ctx, answerCopies*int64(n))
}

// wireSize is the length of body (JSON written without HTML escaping) as
// the SDK writes it in a result: CallToolResult's MarshalJSON is
// json.Marshal's, which escapes each <, > and & of the structured content
// to six bytes. An answer measured without that was up to six times its
// cap on the wire.
func wireSize(body string) int {
	return len(body) + 5*(strings.Count(body, "<")+strings.Count(body, ">")+strings.Count(body, "&"))
}

// runTool reads the arguments, runs t, and returns its result with the
// result's JSON.
func (s *Server) runTool(ctx context.Context, t mcpTool, raw json.RawMessage) (any, string, error) {
	args, err := api.DecodeArgs(raw)
	if err != nil {
		return nil, "", err
	}
	out, err := t.run(ctx, args)
	if err != nil {
		return nil, "", err
	}
	body, err := api.MarshalNoEscape(out)
	return out, body, err
}

// toolRefusal is a refused call's structuredContent: the REST API's code
// and sentence, and what a throttled agent needs to wait.
type toolRefusal struct {
	Code   string `json:"code" jsonschema:"the REST API's error code: rate_limited, domain_blocked, recipient_suppressed, not_found, validation_error, ..."`
	Detail string `json:"detail" jsonschema:"what went wrong, in a sentence"`
	// RetryAfterSeconds is set when waiting helps.
	RetryAfterSeconds int              `json:"retry_after_seconds,omitempty" jsonschema:"wait this many seconds before trying again"`
	Violated          []string         `json:"violated,omitempty" jsonschema:"rate_limited: the throttle windows without room (per-second, per-minute, per-hour, per-day, inbox-per-minute, inbox-per-hour, inbox-per-day); too_many_recipients: the window whose limit is below the email's recipients"`
	Errors            []api.FieldError `json:"errors,omitempty" jsonschema:"validation_error: one item per problem; loc names the argument"`
	// Suppressed names the recipients of a recipient_suppressed refusal.
	Suppressed []api.SuppressedRecipient `json:"suppressed,omitempty" jsonschema:"recipient_suppressed: each suppressed recipient, its reason and since when"`
}

// refusalResult is p as a tool result an agent can act on.
func refusalResult(p api.Problem) *sdk.CallToolResult {
	r := toolRefusal{Code: p.Code, Detail: p.Detail, RetryAfterSeconds: p.RetryAfter, Violated: p.Violated,
		Errors: p.Fields, Suppressed: p.Suppressed}
	body, _ := api.MarshalNoEscape(r) // strings, ints and FieldErrors always marshal
	return &sdk.CallToolResult{IsError: true, StructuredContent: json.RawMessage(body),
		Content: []sdk.Content{&sdk.TextContent{Text: refusalText(p)}}}
}

// refusalText is the sentence a model reads: what happened and what to do.
func refusalText(p api.Problem) string {
	switch p.Code {
	case "rate_limited":
		return fmt.Sprintf("%s. Nothing was sent. Try again in %d second%s, with the same idempotency_key; "+
			"get_rate_limit shows when each window has room. Or send with on_throttle: \"queue\": the server "+
			"then holds the email and sends it when the windows have room.", p.Detail, p.RetryAfter, plural(p.RetryAfter))
	case "domain_blocked":
		return p.Detail + ". Nothing was sent: the server's outbound policy refuses these domains, " +
			"so retrying will not help; send without those recipients or ask the operator."
	case "recipient_suppressed":
		return p.Detail + ". Nothing was sent: mail to these addresses bounced or was reported as spam, " +
			"so retrying will not help; send without them. list_suppressions shows why each is on the list."
	case "too_many_recipients":
		return p.Detail + ". Nothing was sent: no wait would admit it. Send it as several emails, " +
			"each to fewer recipients than the limit."
	case "validation_error":
		return p.Detail + ". Fix these arguments and call again."
	}
	if p.RetryAfter > 0 {
		return fmt.Sprintf("%s. Try again in %d second%s.", strings.TrimSuffix(p.Detail, "."), p.RetryAfter, plural(p.RetryAfter))
	}
	return p.Detail
}

// schemaOptions derives the tools' schemas from their Go types: a
// timestamp is JSON text, not the struct time.Time is, and a validation
// error's location is names and indexes.
func schemaOptions() *jsonschema.ForOptions {
	return &jsonschema.ForOptions{TypeSchemas: map[reflect.Type]*jsonschema.Schema{
		reflect.TypeFor[api.Timestamp](): {Type: "string", Description: "RFC 3339 time, UTC"},
		reflect.TypeFor[[]any](): {Type: "array", Items: &jsonschema.Schema{AnyOf: []*jsonschema.Schema{
			{Type: "string"}, {Type: "integer"}}}},
	}}
}

// inputSchema is the schema of a tool's arguments, from the Go type that
// documents them (the binder, not this type, reads them).
func inputSchema[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](schemaOptions())
	if err != nil {
		panic("api: tool input schema: " + err.Error()) // a programming error, caught by every test
	}
	portable(s)
	return s
}

// portable rewrites what jsonschema.For writes for Go's nil-able types,
// "type": ["null", T], which clients that map tool schemas onto a
// single-type dialect (Gemini's function declarations) reject: a list is
// just an array (the API never writes null for one), anything else that
// may be null is anyOf [null, T].
func portable(s *jsonschema.Schema) {
	if s == nil {
		return
	}
	for _, p := range s.Properties {
		portable(p)
	}
	portable(s.Items)
	portable(s.AdditionalProperties)
	for _, a := range s.AnyOf {
		portable(a)
	}
	if len(s.Types) != 2 || s.Types[0] != "null" {
		return
	}
	if t := s.Types[1]; t == "array" {
		s.Types, s.Type = nil, t
		return
	}
	value := *s
	value.Types, value.Type, value.Description = nil, s.Types[1], ""
	*s = jsonschema.Schema{Description: s.Description, AnyOf: []*jsonschema.Schema{{Type: "null"}, &value}}
}

// outputSchema is the schema of a tool's structuredContent: T's, or a
// refusal's (toolRefusal). Clients check a result against it whether or
// not isError is set, so the refusal must fit it too. Both shapes'
// properties are listed at the top, for clients that read only those.
func outputSchema[T any]() *jsonschema.Schema {
	s, refused := inputSchema[T](), inputSchema[toolRefusal]()
	required := s.Required
	s.Required = nil
	for _, name := range refused.PropertyOrder {
		s.Properties[name] = refused.Properties[name]
		s.PropertyOrder = append(s.PropertyOrder, name)
	}
	s.AnyOf = []*jsonschema.Schema{{Required: required}, {Required: refused.Required}}
	return s
}
