package config

import (
	"fmt"

	"github.com/nornweave/nornweave/providers/notify"
)

// WebhooksOut configures the events the server delivers to applications'
// endpoints (issue 30), and sends that answer before they are sent.
type WebhooksOut struct {
	// WebhookAllowHTTP accepts http:// endpoints; WebhookAllowPrivateTargets
	// accepts endpoints on loopback, private, link-local and other
	// addresses outside the public internet. Both are off: a webhook URL
	// must not become a way into the operator's own network. They are for
	// development and tests.
	WebhookAllowHTTP           bool `envconfig:"WEBHOOK_ALLOW_HTTP" default:"false"`
	WebhookAllowPrivateTargets bool `envconfig:"WEBHOOK_ALLOW_PRIVATE_TARGETS" default:"false"`
	// WebhookRetrySchedule is the waits before each retry of an event,
	// after its first attempt at once (empty: Svix's 5s,5m,30m,2h,5h,10h,10h).
	WebhookRetrySchedule string `envconfig:"WEBHOOK_RETRY_SCHEDULE"`
	// SendRespondAsync makes POST /v1/messages answer 202 queued at once,
	// as if every request said Prefer: respond-async; Prefer:
	// respond-sync asks for the answer after the send.
	SendRespondAsync bool `envconfig:"SEND_RESPOND_ASYNC" default:"false"`
}

func (c Config) validateWebhooksOut() []error {
	if _, err := notify.ParseSchedule(c.WebhookRetrySchedule); err != nil {
		return []error{fmt.Errorf("WEBHOOK_RETRY_SCHEDULE: %v (e.g. 5s,5m,30m)", err)}
	}
	return nil
}
