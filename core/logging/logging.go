// Package logging builds the server's slog.Logger and carries the request id
// through a context.Context, so that every log line written while serving a
// request names it, whichever package writes the line.
package logging

import (
	"context"
	"io"
	"log/slog"
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
