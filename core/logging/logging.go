// Package logging builds the server's slog.Logger and carries the request id
// through a context.Context, so that every log line written while serving a
// request names it, whichever package writes the line.
package logging

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

type requestIDKey struct{}

// WithRequestID returns a context carrying the request id.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID returns the request id carried by ctx, or "".
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// New returns a JSON logger at level writing to w whose lines carry the
// request id of the context they are logged with (the *Context methods).
func New(w io.Writer, level slog.Leveler) *slog.Logger {
	return NewFormat(w, level, "json")
}

// NewFormat is New in the given format: "text" writes slog's key=value
// lines, for a person at a terminal; anything else JSON, for a collector.
func NewFormat(w io.Writer, level slog.Leveler, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "text" {
		return slog.New(contextHandler{slog.NewTextHandler(w, opts)})
	}
	return slog.New(contextHandler{slog.NewJSONHandler(w, opts)})
}

// contextHandler adds request_id from the record's context.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String("request_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// PrintfLogger adapts a slog.Logger to libraries that log through
// Printf(ctx, format, args...), as go-redis does: each call is one line at
// Level with message Msg and the library's text as "detail", so that under
// LOG_FORMAT=json the library writes JSON like the rest.
type PrintfLogger struct {
	Logger *slog.Logger
	Level  slog.Level
	Msg    string
}

// Printf logs one line.
func (p PrintfLogger) Printf(ctx context.Context, format string, args ...any) {
	text := strings.TrimSpace(fmt.Sprintf(format, args...))
	// go-redis starts some of its lines with its name; Msg says it already.
	text = strings.TrimPrefix(text, "redis: ")
	p.Logger.LogAttrs(ctx, p.Level, p.Msg, slog.String("detail", text))
}

// AtLeast returns a logger writing what l writes, but only at level or
// above: for a library that logs its routine at INFO (the MCP SDK logs
// every connection) when only its warnings and errors belong in ours.
func AtLeast(l *slog.Logger, level slog.Level) *slog.Logger {
	return slog.New(minLevel{l.Handler(), level})
}

type minLevel struct {
	slog.Handler
	min slog.Level
}

func (h minLevel) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h minLevel) WithAttrs(attrs []slog.Attr) slog.Handler {
	return minLevel{h.Handler.WithAttrs(attrs), h.min}
}

func (h minLevel) WithGroup(name string) slog.Handler {
	return minLevel{h.Handler.WithGroup(name), h.min}
}
