package api

import (
	"bytes"
	"net"
	"net/http"
	"strconv"
	"strings"
)

// Listener wraps l so that the errors net/http answers by itself, before
// any handler runs, come in the API's JSON shape like every other: a
// request line it cannot parse (/v1/messages/%zz: an escape that is not
// one), a header block beyond the server's MaxHeaderBytes (431), a bad
// header or Host, an unknown Transfer-Encoding (501). net/http writes
// those as plain text straight to the connection; the connection this
// returns recognises exactly that write and rewrites it. Everything else
// passes through untouched.
//
// Serve the API's http.Server on Listener(l), not on l.
func Listener(l net.Listener) net.Listener { return jsonErrorListener{l} }

type jsonErrorListener struct{ net.Listener }

func (l jsonErrorListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return jsonErrorConn{c}, nil
}

type jsonErrorConn struct{ net.Conn }

// goErrorHeaders is what net/http's server puts between the status line
// and the body of its own error answers (server.go, conn.serve), and
// nowhere else: a handler's answer always has a Date header too.
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

func (c jsonErrorConn) Write(p []byte) (int, error) {
	if out, ok := rewriteGoError(p); ok {
		if _, err := c.Conn.Write(out); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// rewriteGoError turns one of net/http's own plain-text error answers,
// "HTTP/1.1 431 Request Header Fields Too Large" + goErrorHeaders + text,
// into the same status with {"detail", "code"}; ok is false for anything
// else.
func rewriteGoError(p []byte) (out []byte, ok bool) {
	i := bytes.Index(p, []byte(goErrorHeaders))
	if i < 0 || !bytes.HasPrefix(p, []byte("HTTP/1.1 ")) || len(p) < len("HTTP/1.1 400") ||
		bytes.Contains(p[:i], []byte("\r\n")) || bytes.Contains(p[i+len(goErrorHeaders):], []byte("\r\n")) {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[9:12]))
	if err != nil {
		return nil, false
	}
	// The status line is "431 Request Header Fields Too Large", or
	// "400 Bad Request: missing required Host header".
	_, why, _ := strings.Cut(string(p[12:i]), ": ")
	code, detail := "bad_request", "Malformed HTTP request (the request line, a header, or an escape such as %zz in the URL)"
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		code, detail = "headers_too_large", "Request header fields too large"
	case status == http.StatusNotImplemented:
		code, detail = "not_implemented", "Unsupported Transfer-Encoding"
	case status != http.StatusBadRequest:
		code, detail = "http_"+strconv.Itoa(status), http.StatusText(status)
	case why != "":
		detail = "Malformed HTTP request: " + why
	}
	body, err := MarshalNoEscape(ErrorBody{Detail: detail, Code: code})
	if err != nil {
		return nil, false
	}
	var b bytes.Buffer
	b.WriteString("HTTP/1.1 " + strconv.Itoa(status) + " " + http.StatusText(status) + "\r\n")
	b.WriteString("Cache-Control: no-store\r\nConnection: close\r\nContent-Type: application/json\r\n")
	b.WriteString("Content-Length: " + strconv.Itoa(len(body)+1) + "\r\n")
	b.WriteString("X-Content-Type-Options: nosniff\r\n\r\n")
	b.WriteString(body + "\n")
	return b.Bytes(), true
}
