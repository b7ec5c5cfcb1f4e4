package webhook

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/resend/resend-go/v3"
)

// Resend verifies Resend's webhooks, signed by Svix, with resend-go's
// Webhooks.Verify: HMAC-SHA256 of svix-id, svix-timestamp and the raw
// body with the endpoint's secret (RESEND_WEBHOOK_SECRET, whsec_…), the
// timestamp within its 300 s tolerance (Tolerance), which it reads from
// the system clock. svix-id names the event: one seen before is
// recognised where events are stored.
type Resend struct {
	secret   string
	webhooks resend.WebhooksSvc
}

// NewResend returns a verifier for secret, which must be a whsec_ secret.
func NewResend(secret string) (*Resend, error) {
	key, ok := strings.CutPrefix(secret, "whsec_")
	if _, err := base64.StdEncoding.DecodeString(key); !ok || key == "" || err != nil {
		return nil, errors.New("RESEND_WEBHOOK_SECRET: want the endpoint's signing secret, whsec_ and base64")
	}
	return &Resend{secret: secret, webhooks: resend.NewClient("").Webhooks}, nil
}

// Verify checks a Resend webhook's headers and raw body.
func (r *Resend) Verify(h http.Header, body []byte) error {
	err := r.webhooks.Verify(&resend.VerifyWebhookOptions{
		Payload:       string(body),
		WebhookSecret: r.secret,
		Headers: resend.WebhookHeaders{Id: h.Get("svix-id"), Timestamp: h.Get("svix-timestamp"),
			Signature: h.Get("svix-signature")},
	})
	if err != nil {
		return refuse("resend", "%v", err)
	}
	return nil
}
