package app

import (
	"context"
	"fmt"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers/webhook"
)

// WithCertFetcher makes fetch read SNS's signing certificates and
// subscription confirmations instead of HTTPS to AWS: an end-to-end test
// serves its own certificate, offline.
func WithCertFetcher(fetch func(ctx context.Context, url string) ([]byte, error)) Option {
	return func(a *App) { a.certFetch = fetch }
}

// webhooks builds the verifier of each provider whose secret is set, and
// the recorder of their events; nil when none is.
func (a *App) webhooks() (*api.Webhooks, error) {
	cfg, now := a.cfg, a.clock.Now
	w := &api.Webhooks{Events: a.events}
	if cfg.MailgunWebhookSigningKey != "" {
		w.Mailgun = webhook.NewMailgun(cfg.MailgunWebhookSigningKey, now)
	}
	if cfg.SendgridWebhookPublicKey != "" {
		sg, err := webhook.NewSendGrid(cfg.SendgridWebhookPublicKey, now)
		if err != nil {
			return nil, fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: %w", err)
		}
		w.SendGrid = sg
	}
	if cfg.ResendWebhookSecret != "" {
		rs, err := webhook.NewResend(cfg.ResendWebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("RESEND_WEBHOOK_SECRET: %w", err)
		}
		w.Resend = rs
	}
	if topics := config.SplitList(cfg.SESSNSTopicARNs); len(topics) > 0 {
		sns, err := webhook.NewSNS(topics, a.certFetch, now)
		if err != nil {
			return nil, fmt.Errorf("SES_SNS_TOPIC_ARNS: %w", err)
		}
		w.SES = sns
	}
	if w.Mailgun == nil && w.SendGrid == nil && w.Resend == nil && w.SES == nil {
		return nil, nil
	}
	return w, nil
}
