package providers

import (
	"context"
	"log/slog"
)

// Demo is a provider that sends nothing: it reports success, so the
// message is recorded as sent and the pipeline logs it once ("message sent",
// provider demo), for trying the API without a mail server. It is safe
// for concurrent use.
type Demo struct {
	logger *slog.Logger
}

// NewDemo returns a Demo that logs to logger (nil: no logging).
func NewDemo(logger *slog.Logger) *Demo {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Demo{logger: logger}
}

// Name returns "demo".
func (d *Demo) Name() string { return "demo" }

// Send returns m.MessageID as the provider id. Like every provider's own
// line, its line is DEBUG: the outcome is the pipeline's to log, once; a
// demo line at INFO that said "not sent" came just before the pipeline's
// "message sent". The line carries counts and sizes only: recipients and
// bodies are personal data.
func (d *Demo) Send(ctx context.Context, m Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	d.logger.DebugContext(ctx, "demo provider: message accepted, delivered to no one",
		slog.String("message_id_header", m.MessageID),
		slog.String("from", m.From),
		slog.Int("recipient_count", m.RecipientCount()),
		slog.Int("subject_length", len(m.Subject)),
		slog.Int("attachment_count", len(m.Attachments)),
	)
	return m.MessageID, nil
}
