package providers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/mail"
	"net/url"
	"strings"

	"github.com/resend/resend-go/v3"
)

// DefaultResendAPIBase is Resend's API.
const DefaultResendAPIBase = "https://api.resend.com"

// ResendConfig configures a Resend provider.
type ResendConfig struct {
	APIKey string
	// APIBase overrides DefaultResendAPIBase (scheme, host and an optional
	// path prefix).
	APIBase string
	HTTPConfig
}

// Resend sends through Resend's API (POST /emails) with the official SDK,
// resend-go. Resend takes no raw MIME, so every field is mapped; the
// threading headers go in "headers". resend-go does not retry. Every
// request carries the message's Idempotency-Key (resendIdempotencyKey), so
// a retry of a message Resend took cannot send it twice. It is safe for
// concurrent use.
type Resend struct {
	*httpBase
	client *resend.Client
}

// NewResend validates cfg and returns a provider. It makes no request.
func NewResend(cfg ResendConfig) (*Resend, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("resend: an API key is required")
	}
	apiBase := strings.TrimSpace(cfg.APIBase)
	if apiBase == "" {
		apiBase = DefaultResendAPIBase
	}
	// The SDK resolves "emails" against the base: it must end in "/".
	u, err := url.Parse(strings.TrimRight(apiBase, "/") + "/")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("resend: the API base must be an http or https URL")
	}
	base, err := newHTTPBase("resend", "RESEND_API_KEY", cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	c := resend.NewCustomClient(base.client, cfg.APIKey)
	c.BaseURL = u
	return &Resend{httpBase: base, client: c}, nil
}

// Name returns "resend".
func (p *Resend) Name() string { return "resend" }

// Close closes idle connections; later Sends fail. Safe to call twice.
func (p *Resend) Close() error { return p.close() }

// Send delivers m and returns Resend's id for it. Failures are *SendError.
func (p *Resend) Send(ctx context.Context, m Message) (string, error) {
	if err := checkHeaderValues(m); err != nil {
		return "", invalidMessage("resend", err)
	}
	req := resendRequest(m)
	opts := &resend.SendEmailOptions{IdempotencyKey: resendIdempotencyKey(m.MessageID)}
	id, err := p.call(ctx, m.MessageID, func(ctx context.Context) (string, error) {
		res, err := p.client.Emails.SendWithOptions(ctx, req, opts)
		if err != nil {
			return "", err
		}
		return res.Id, nil
	}, func(a *attempt, err error) string {
		if a.status == 0 {
			return err.Error()
		}
		return apiDetail(a)
	})
	var se *SendError
	if errors.As(err, &se) && se.Code == http.StatusConflict && opts.IdempotencyKey != "" {
		// Resend's 409s are about the key: a request with it is still in
		// progress, or was taken with other content. Either way a message
		// under this key may have gone out.
		se.Temporary, se.Unknown = false, true
		se.msg = "resend: the provider already has a request for this message (409), it may have been delivered: " +
			strings.TrimPrefix(se.msg, "resend: rejected (409): ")
	}
	return id, err
}

// maxResendIdempotencyKey is the longest key Resend accepts.
const maxResendIdempotencyKey = 256

// resendIdempotencyKey is the key every attempt of one message sends, so
// that Resend answers a repeat with the first answer instead of a second
// email: the message's own Message-ID, made once per message by the send
// pipeline and unique, or its SHA-256 when it is longer than Resend takes.
// Resend keeps a key for 24 hours, longer than any send's retries.
func resendIdempotencyKey(messageID string) string {
	if len(messageID) <= maxResendIdempotencyKey {
		return messageID
	}
	sum := sha256.Sum256([]byte(messageID))
	return hex.EncodeToString(sum[:])
}

// resendRequest maps m onto the Send Email JSON. Resend accepts the
// addresses as RFC 5322 strings, display names included.
func resendRequest(m Message) *resend.SendEmailRequest {
	from := m.From
	if m.FromName != "" {
		from = (&mail.Address{Name: m.FromName, Address: m.From}).String()
	}
	req := &resend.SendEmailRequest{
		From:    from,
		To:      addrHeaders(m.To),
		Cc:      addrHeaders(m.Cc),
		Bcc:     addrHeaders(m.Bcc),
		Subject: m.Subject,
		Text:    m.Text,
		Html:    m.HTML,
		// resend-go's reply_to is one string; a list in it is what
		// RFC 5322 writes in a Reply-To header.
		ReplyTo: strings.Join(addrHeaders(m.ReplyTo), ", "),
		Headers: map[string]string{},
	}
	if m.MessageID != "" {
		req.Headers["Message-ID"] = m.MessageID
	}
	if m.InReplyTo != "" {
		req.Headers["In-Reply-To"] = m.InReplyTo
	}
	if len(m.References) > 0 {
		req.Headers["References"] = strings.Join(m.References, " ")
	}
	for _, a := range m.Attachments {
		att := &resend.Attachment{Content: a.Content, Filename: a.Filename, ContentType: a.ContentType}
		if a.Inline {
			// Resend sends an attachment with a content id inline.
			att.ContentId = strings.Trim(a.ContentID, "<>")
		}
		req.Attachments = append(req.Attachments, att)
	}
	return req
}
