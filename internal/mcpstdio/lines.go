package mcpstdio

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The SDK's stdio transport ends the session on the first line that is
// not a JSON-RPC message, and `nornweave mcp` exited with it: a client
// that spawned it lost every later request. Lines are checked here
// first; a bad one is answered with a JSON-RPC error, as the server's
// /mcp answers it, and reading goes on.

// JSON-RPC 2.0's codes for a message that cannot be read.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
)

// maxLine is the longest message read: the SDK's own frame limit.
const maxLine = mcp.DefaultMaxLineLength

// lockedWriter makes each Write whole: the SDK writes a message (and its
// newline) in one Write, and so does a refusal here.
type lockedWriter struct {
	mu sync.Mutex
	w  io.WriteCloser
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) Close() error { return l.w.Close() }

// checkedLines is in, with every line that is not a single JSON-RPC
// message answered on out and left out. Closing it closes in.
type checkedLines struct {
	*io.PipeReader
	in io.Closer
}

func (c checkedLines) Close() error {
	c.PipeReader.Close()
	return c.in.Close()
}

// filterLines starts copying the good lines of in to what it returns.
func filterLines(in io.ReadCloser, out io.Writer) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		br := bufio.NewReaderSize(in, 64<<10)
		for {
			line, tooLong, err := readLine(br)
			switch {
			case tooLong:
				refuse(out, nil, codeInvalidRequest, "Invalid request: a message is at most 16 MiB")
			case len(bytes.TrimSpace(line)) > 0:
				if id, code, msg := check(line); code != 0 {
					refuse(out, id, code, msg)
				} else if _, werr := pw.Write(append(line, '\n')); werr != nil {
					return // the session is closed
				}
			}
			if err != nil {
				pw.CloseWithError(err) // io.EOF: the client closed stdin
				return
			}
		}
	}()
	return checkedLines{PipeReader: pr, in: in}
}

// readLine reads one line, without its newline, of at most maxLine bytes;
// a longer one is read to its end and dropped (tooLong).
func readLine(br *bufio.Reader) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > maxLine+1 {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		return bytes.TrimRight(line, "\r\n"), tooLong, err
	}
}

// check says what is wrong with a line, as JSON-RPC codes it; code 0 is a
// message to pass on.
func check(line []byte) (id json.RawMessage, code int, msg string) {
	if !json.Valid(line) {
		return nil, codeParseError, "Parse error: the line is not JSON"
	}
	if bytes.TrimSpace(line)[0] == '[' {
		return nil, codeInvalidRequest, "JSON-RPC batches are not supported (MCP removed them in 2025-06-18): send one message per line"
	}
	var m struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  *string         `json:"method"`
		Result  json.RawMessage `json:"result"`
		Error   json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return nil, codeInvalidRequest, "Invalid request: a JSON-RPC message is a JSON object"
	}
	if c := firstByte(m.ID); c != 0 && c != '"' && c != '-' && (c < '0' || c > '9') && string(m.ID) != "null" {
		return nil, codeInvalidRequest, "Invalid request: id must be a string or a number"
	}
	if m.JSONRPC != "2.0" {
		return m.ID, codeInvalidRequest, `Invalid request: "jsonrpc" must be "2.0"`
	}
	if m.Method == nil && (m.ID == nil || (m.Result == nil && m.Error == nil)) {
		return m.ID, codeInvalidRequest, "Invalid request: neither a request nor a response"
	}
	return nil, 0, ""
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// refuse writes a JSON-RPC error for a line that was not passed on.
func refuse(out io.Writer, id json.RawMessage, code int, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": code, "message": msg}})
	_, _ = out.Write(append(b, '\n'))
}
