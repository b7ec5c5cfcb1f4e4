package providers

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"

	"github.com/mailgun/mailgun-go/v4"

	"github.com/nornweave/nornweave/core/address"
)

// DefaultMailgunAPIBase is Mailgun's US region; the EU region is
// https://api.eu.mailgun.net.
const DefaultMailgunAPIBase = "https://api.mailgun.net"

// MailgunConfig configures a Mailgun provider.
type MailgunConfig struct {
	APIKey string
	Domain string // the sending domain registered with Mailgun
	// APIBase overrides DefaultMailgunAPIBase (the EU region, a gateway, a
	// test server); "/v3" is added unless it already ends in a version.
	APIBase string
	HTTPConfig
}

// Mailgun sends through Mailgun's MIME endpoint
// (POST /v3/{domain}/messages.mime) with the official SDK, mailgun-go: the
// message is the MIME the SMTP provider builds, so every header, part and
// inline image goes out as it would over SMTP. Mailgun's messages API and
// mailgun-go take no idempotency key, so a message Mailgun may have taken
// (an unknown outcome) is never sent again rather than deduplicated. It is
// safe for concurrent use.
type Mailgun struct {
	*httpBase
	mg *mailgun.MailgunImpl
}

// NewMailgun validates cfg and returns a provider. It makes no request.
func NewMailgun(cfg MailgunConfig) (*Mailgun, error) {
	if cfg.APIKey == "" || cfg.Domain == "" {
		return nil, errors.New("mailgun: an API key and a domain are required")
	}
	base, err := newHTTPBase("mailgun", "MAILGUN_API_KEY", cfg.HTTPConfig)
	if err != nil {
		return nil, err
	}
	mg := mailgun.NewMailgun(cfg.Domain, cfg.APIKey)
	mg.SetAPIBase(mailgunAPIBase(cfg.APIBase))
	mg.SetClient(base.client)
	return &Mailgun{httpBase: base, mg: mg}, nil
}

// mailgunAPIBase adds the API version mailgun-go v4 expects at the end of
// its base URL; MAILGUN_API_BASE is documented without it.
func mailgunAPIBase(s string) string {
	s = strings.TrimRight(strings.TrimSpace(s), "/")
	if s == "" {
		s = DefaultMailgunAPIBase
	}
	for _, v := range []string{"/v1", "/v2", "/v3", "/v4"} {
		if strings.HasSuffix(s, v) {
			return s
		}
	}
	return s + "/v3"
}

// Name returns "mailgun".
func (p *Mailgun) Name() string { return "mailgun" }

// Close closes idle connections; later Sends fail. Safe to call twice.
func (p *Mailgun) Close() error { return p.close() }

// Send delivers m and returns Mailgun's id for it. Failures are *SendError.
func (p *Mailgun) Send(ctx context.Context, m Message) (string, error) {
	raw, err := encodeMIME(m, p.now)
	if err != nil {
		return "", invalidMessage("mailgun", err)
	}
	to, err := mailgunRecipients(m)
	if err != nil {
		return "", invalidMessage("mailgun", err)
	}
	return p.call(ctx, m.MessageID, func(ctx context.Context) (string, error) {
		msg := mailgun.NewMIMEMessage(io.NopCloser(bytes.NewReader(raw)), to...)
		_, id, err := p.mg.Send(ctx, msg)
		return id, err
	}, func(a *attempt, err error) string {
		if a.status == 0 && a.requests.Load() == 0 {
			return err.Error() // mailgun-go's own validation
		}
		return apiDetail(a)
	})
}

// mailgunRecipients is the envelope: the MIME endpoint's "to" fields carry
// every recipient, Bcc included, which the MIME headers do not name.
func mailgunRecipients(m Message) ([]string, error) {
	var to []string
	for _, list := range [][]address.Address{m.To, m.Cc, m.Bcc} {
		to = append(to, addrSpecs(list)...)
	}
	return to, nil
}
