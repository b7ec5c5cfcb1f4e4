package providers

import (
	"context"
	"errors"
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
// threading headers go in "headers". resend-go does not retry. It is safe
// for concurrent use.
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
		return "", NewSendError("resend: not sent: "+strings.TrimPrefix(err.Error(), "smtp: "), err)
	}
	req := resendRequest(m)
	return p.call(ctx, m.MessageID, func(ctx context.Context) (string, error) {
		res, err := p.client.Emails.SendWithContext(ctx, req)
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
