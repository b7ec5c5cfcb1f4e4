package mcp

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/api"
)

// /mcp in front of the SDK's streamable HTTP handler. The SDK decodes a
// batch whole and runs every item, answers transport problems in
// text/plain, and reads a JSON-RPC id into an int64 (1.5 comes back as
// 1). Here the body is read once, checked as one JSON-RPC message, and
// only then handed on: a batch is refused before any item is decoded, and
// every refusal is either a JSON-RPC error or the API's {detail, code}.

// JSON-RPC 2.0's error codes for what the transport refuses.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// mcpMessage is the envelope of one JSON-RPC message: decoding into it
// skips params without keeping them.
type mcpMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  *string         `json:"method"`
}

// plainID is an id the SDK echoes as it came: a string, or an integer it
// holds exactly in an int64 (and a float64 on the way in).
var plainID = regexp.MustCompile(`^(?:"(?:[^"\\]|\\.)*"|-?(?:0|[1-9][0-9]{0,14}))$`)

// idToken stands in for an id the SDK would not echo exactly; the answer's
// id is put back before it is written. One message per request, so the
// token never meets another id.
const idToken = `"nornweave-rpc-id"`

// serveMCP reads and checks the body, then lets the SDK answer through a
// writer that keeps the answer inside the API's contract. Whatever the
// answer holds of the in-flight budget (see chargeAnswer) is given back
// once it is written.
func (s *Server) serveMCP(c echo.Context, sdk http.Handler) error {
	req := c.Request()
	body, err := io.ReadAll(io.LimitReader(req.Body, s.api.BodyLimit()+1))
	if err != nil {
		return api.ReadError(err)
	}
	if int64(len(body)) > s.api.BodyLimit() {
		return echo.NewHTTPError(http.StatusRequestEntityTooLarge) // the API's payload_too_large
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		return rpcError(c, nil, codeInvalidRequest,
			"JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per request")
	}
	var msg mcpMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || len(trimmed) == 0 {
			return rpcError(c, nil, codeParseError, "Parse error: the body is not JSON")
		}
		return rpcError(c, nil, codeInvalidRequest, "Invalid request: a JSON-RPC message is a JSON object")
	}
	id := bytes.TrimSpace(msg.ID)
	if !validID(id) {
		return rpcError(c, nil, codeInvalidRequest, "Invalid request: id must be a string or a number")
	}
	if msg.JSONRPC != "2.0" {
		return rpcError(c, id, codeInvalidRequest, `Invalid request: "jsonrpc" must be "2.0"`)
	}
	w := &mcpWriter{ResponseWriter: c.Response().Writer}
	if len(id) > 0 && string(id) != "null" && !plainID.Match(id) {
		if body, err = replaceID(body); err != nil {
			return rpcError(c, nil, codeParseError, "Parse error: the body is not JSON")
		}
		w.id = id
	}
	ctx, release := withAnswerAccount(req.Context())
	defer release()
	req = req.WithContext(ctx)
	req.Body, req.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	sdk.ServeHTTP(w, req)
	if w.status != 0 {
		return s.sdkRefusal(c, w.status, w.text.String(), id)
	}
	return nil
}

// sdkRPCErrors are the JSON-RPC errors the SDK writes as text, by the
// start of their text (its jsonrpc2 package's sentinels).
var sdkRPCErrors = []struct {
	prefix string
	code   int
}{{"JSON RPC not handled", -32601}, {"invalid request", codeInvalidRequest}, {"invalid params", -32602}}

// validID reports whether id (valid JSON, or absent) is one JSON-RPC
// allows: a string, a number or null.
func validID(id json.RawMessage) bool {
	if len(id) == 0 || string(id) == "null" {
		return true
	}
	c := id[0]
	return c == '"' || c == '-' || (c >= '0' && c <= '9')
}

// rpcError answers 400 with a JSON-RPC error, as the transport specifies
// for a message the server cannot accept; id is the request's, if known.
func rpcError(c echo.Context, id json.RawMessage, code int, message string) error {
	return rpcErrorStatus(c, http.StatusBadRequest, id, code, message)
}

// rpcErrorStatus is rpcError with another HTTP status.
func rpcErrorStatus(c echo.Context, status int, id json.RawMessage, code int, message string) error {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	return c.JSON(status, struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, message}})
}

// replaceID puts idToken in place of the top-level id of body.
func replaceID(body []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var value json.RawMessage
		start := dec.InputOffset()
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		if key != "id" {
			continue
		}
		end := dec.InputOffset()
		at := start + int64(bytes.Index(body[start:end], bytes.TrimSpace(value)))
		out := append([]byte{}, body[:at]...)
		out = append(out, idToken...)
		return append(out, body[at+int64(len(bytes.TrimSpace(value))):]...), nil
	}
	return nil, errors.New("no id")
}

// sdkRefusal answers a refusal the SDK wrote in text/plain, with its
// status: as a JSON-RPC error if it is one (a method not found), else as
// the API's {detail, code}.
func (s *Server) sdkRefusal(c echo.Context, status int, text string, id json.RawMessage) error {
	c.Response().Header().Del("Content-Type")
	c.Response().Header().Del("X-Content-Type-Options")
	detail := strings.TrimSpace(text)
	for _, e := range sdkRPCErrors {
		if strings.HasPrefix(detail, e.prefix) {
			return rpcErrorStatus(c, status, id, e.code, detail)
		}
	}
	p := s.api.HTTPErrorProblem(echo.NewHTTPError(status))
	switch {
	case status == http.StatusRequestEntityTooLarge || detail == "":
		detail = p.Detail
	case status == http.StatusBadRequest:
		p.Code = "bad_request"
	}
	return c.JSON(status, api.ErrorBody{Detail: detail, Code: p.Code})
}

// mcpWriter is the SDK's ResponseWriter. A text/plain error is held back
// (status, text) for sdkRefusal to answer in JSON; an answer to a request
// whose id was replaced gets that id back. The SDK writes a JSON answer
// in one Write, so the id is always in the first.
type mcpWriter struct {
	http.ResponseWriter
	id     json.RawMessage // the id as sent, when it was replaced
	status int             // a text/plain error's status
	text   bytes.Buffer    // its text, the first maxRefusalText bytes
}

// maxRefusalText bounds what is kept of an SDK refusal's text.
const maxRefusalText = 1 << 10

func (w *mcpWriter) WriteHeader(code int) {
	if code >= 400 && strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.status = code
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *mcpWriter) Write(p []byte) (int, error) {
	if w.status != 0 {
		w.text.Write(p[:min(len(p), max(0, maxRefusalText-w.text.Len()))])
		return len(p), nil
	}
	if w.id != nil {
		if i := bytes.Index(p, []byte(`"id":`+idToken)); i >= 0 {
			fixed := make([]byte, 0, len(p)-len(idToken)+len(w.id))
			fixed = append(append(append(fixed, p[:i+5]...), w.id...), p[i+5+len(idToken):]...)
			w.id = nil
			if _, err := w.ResponseWriter.Write(fixed); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return w.ResponseWriter.Write(p)
}

// Flush passes a flush on, for the SDK's event streams.
func (w *mcpWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *mcpWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
