package providers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"github.com/sendgrid/rest"
	"github.com/sendgrid/sendgrid-go"
	sgmail "github.com/sendgrid/sendgrid-go/helpers/mail"

	"github.com/nornweave/nornweave/core/address"
)

// DefaultSendGridAPIBase is SendGrid's global region; the EU region is
// https://api.eu.sendgrid.com.
const DefaultSendGridAPIBase = "https://api.sendgrid.com"

// SendGridConfig configures a SendGrid provider.
type SendGridConfig struct {
	APIKey string
	// APIBase overrides DefaultSendGridAPIBase (scheme and host, no path).
	APIBase string
	HTTPConfig
}

// SendGrid sends through SendGrid's v3 Mail Send API
// (POST /v3/mail/send) with the official SDK, sendgrid-go: the request is
// built by its mail helper and sent by its rest client on our http.Client,
// never through its retrying helpers (MakeRequestRetry and the async
// variants). SendGrid takes no raw MIME, so every field is mapped; the
// threading headers go in "headers". The v3 Mail Send API and sendgrid-go
// take no idempotency key, so a message SendGrid may have taken (an
// unknown outcome) is never sent again rather than deduplicated. It is
// safe for concurrent use.
type SendGrid struct {
	*httpBase
	apiKey  string
	apiBase string
	rest    *rest.Client
}

// NewSendGrid validates cfg and returns a provider. It makes no request.
func NewSendGrid(cfg SendGridConfig) (*SendGrid, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("sendgrid: an API key is required")
	}
	base, err := newHTTPBase("sendgrid", "SENDGRID_API_KEY", cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	apiBase := strings.TrimRight(strings.TrimSpace(cfg.APIBase), "/")
	if apiBase == "" {
		apiBase = DefaultSendGridAPIBase
	}
	return &SendGrid{httpBase: base, apiKey: cfg.APIKey, apiBase: apiBase,
		rest: &rest.Client{HTTPClient: base.client}}, nil
}

// Name returns "sendgrid".
func (p *SendGrid) Name() string { return "sendgrid" }

// Close closes idle connections; later Sends fail. Safe to call twice.
func (p *SendGrid) Close() error { return p.close() }

// Send delivers m and returns SendGrid's X-Message-Id. Failures are
// *SendError.
func (p *SendGrid) Send(ctx context.Context, m Message) (string, error) {
	if err := checkHeaderValues(m); err != nil {
		return "", invalidMessage("sendgrid", err)
	}
	body, err := sendgridBody(m)
	if err != nil {
		return "", invalidMessage("sendgrid", err)
	}
	return p.call(ctx, m.MessageID, func(ctx context.Context) (string, error) {
		req := sendgrid.GetRequest(p.apiKey, "/v3/mail/send", p.apiBase)
		req.Method = rest.Post
		req.Body = body
		res, err := p.rest.SendWithContext(ctx, req)
		if err != nil {
			return "", err
		}
		if res.StatusCode/100 != 2 {
			return "", fmt.Errorf("status %d", res.StatusCode)
		}
		for k, v := range res.Headers {
			if strings.EqualFold(k, "X-Message-Id") && len(v) > 0 {
				return v[0], nil
			}
		}
		return "", errors.New("no X-Message-Id header in the answer")
	}, func(a *attempt, _ error) string { return apiDetail(a) })
}

// sendgridBody maps m onto the Mail Send JSON.
func sendgridBody(m Message) ([]byte, error) {
	v := sgmail.NewV3Mail()
	from := sgmail.NewEmail("", m.From)
	from.Name = m.FromName
	v.SetFrom(from)
	v.Subject = m.Subject

	p := sgmail.NewPersonalization()
	for _, l := range []struct {
		addrs []address.Address
		add   func(...*sgmail.Email)
	}{{m.To, p.AddTos}, {m.Cc, p.AddCCs}, {m.Bcc, p.AddBCCs}} {
		for _, a := range l.addrs {
			l.add(sendgridAddress(a))
		}
	}
	v.AddPersonalizations(p)

	var replyTo []*sgmail.Email
	for _, a := range m.ReplyTo {
		replyTo = append(replyTo, sendgridAddress(a))
	}
	switch len(replyTo) {
	case 0:
	case 1:
		v.SetReplyTo(replyTo[0])
	default:
		v.SetReplyToList(replyTo)
	}

	// SendGrid requires text/plain before text/html and refuses an empty
	// value; a message with neither still needs one part.
	if m.Text != "" || m.HTML == "" {
		text := m.Text
		if text == "" {
			text = " "
		}
		v.AddContent(sgmail.NewContent("text/plain", text))
	}
	if m.HTML != "" {
		v.AddContent(sgmail.NewContent("text/html", m.HTML))
	}
	for _, a := range m.Attachments {
		att := sgmail.NewAttachment().
			SetContent(base64.StdEncoding.EncodeToString(a.Content)).
			SetFilename(a.Filename).
			SetDisposition("attachment")
		if a.ContentType != "" {
			att.SetType(a.ContentType)
		}
		if a.Inline {
			att.SetDisposition("inline").SetContentID(strings.Trim(a.ContentID, "<>"))
		}
		v.AddAttachment(att)
	}
	if m.MessageID != "" {
		v.SetHeader("Message-ID", m.MessageID)
	}
	if m.InReplyTo != "" {
		v.SetHeader("In-Reply-To", m.InReplyTo)
	}
	if len(m.References) > 0 {
		v.SetHeader("References", strings.Join(m.References, " "))
	}
	return sgmail.GetRequestBody(v), nil
}

// sendgridAddress maps one RFC 5322 address onto SendGrid's {email, name}.
func sendgridAddress(a address.Address) *sgmail.Email {
	return sgmail.NewEmail(a.Name, a.AddrSpec())
}
