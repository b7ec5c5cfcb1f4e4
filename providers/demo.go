package providers

import (
	"context"
	"log/slog"
)

// Demo is a provider that sends nothing: it logs that a message would have
// gone out and reports success, for trying the API without a mail server.
// It is safe for concurrent use.
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

// Send logs one line about m and returns m.MessageID as the provider id.
// The log carries counts and sizes only: recipients and bodies are
// personal data.
func (d *Demo) Send(ctx context.Context, m Message) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	d.logger.InfoContext(ctx, "demo provider: message not sent",
		slog.String("message_id", m.MessageID),
		slog.String("from", m.From),
		slog.Int("recipient_count", m.RecipientCount()),
		slog.Int("subject_length", len(m.Subject)),
		slog.Int("attachment_count", len(m.Attachments)),
	)
	return m.MessageID, nil
}
