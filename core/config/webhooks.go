package config

import (
	"fmt"
	"strings"
	"time"
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

// WebhookRetryWaits is WEBHOOK_RETRY_SCHEDULE read: the waits before each
// retry, nil for the default schedule.
func (w WebhooksOut) WebhookRetryWaits() ([]time.Duration, error) {
	if strings.TrimSpace(w.WebhookRetrySchedule) == "" {
		return nil, nil
	}
	var out []time.Duration
	for _, f := range strings.Split(w.WebhookRetrySchedule, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q is not a positive duration", strings.TrimSpace(f))
		}
		out = append(out, d)
	}
	if len(out) > maxWebhookRetries {
		return nil, fmt.Errorf("%d retries, at most %d", len(out), maxWebhookRetries)
	}
	return out, nil
}

// maxWebhookRetries bounds WEBHOOK_RETRY_SCHEDULE: an event is a job that
// River tries at most this many times more.
const maxWebhookRetries = 19

func (c Config) validateWebhooksOut() []error {
	if _, err := c.WebhookRetryWaits(); err != nil {
		return []error{fmt.Errorf("WEBHOOK_RETRY_SCHEDULE: %v (e.g. 5s,5m,30m)", err)}
	}
	return nil
}
