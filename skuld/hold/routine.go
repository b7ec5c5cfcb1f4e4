package hold

import (
	"context"
	"log/slog"
)

// routine hands River's records on with INFO lowered to DEBUG: River's
// INFO lines are routine ("Producer job counts" every 15 s, a maintenance
// service's "Ran successfully"); its warnings and errors are kept.
type routine struct{ slog.Handler }

func (h routine) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, lowered(l))
}

func (h routine) Handle(ctx context.Context, r slog.Record) error {
	r.Level = lowered(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h routine) WithAttrs(attrs []slog.Attr) slog.Handler {
	return routine{h.Handler.WithAttrs(attrs)}
}
func (h routine) WithGroup(name string) slog.Handler { return routine{h.Handler.WithGroup(name)} }

func lowered(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}
