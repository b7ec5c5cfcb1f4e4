package webhook

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/sendgrid/sendgrid-go/helpers/eventwebhook"
)

// SendGrid verifies SendGrid's signed Event Webhook with sendgrid-go's
// eventwebhook.VerifySignature: ECDSA P-256 over the timestamp header and
// the raw body, with the public key SendGrid shows for the webhook
// (SENDGRID_WEBHOOK_PUBLIC_KEY). That function checks no time, so the
// timestamp must also be within Tolerance. A body is a JSON array of
// events, each with its sg_event_id.
type SendGrid struct {
	key *ecdsa.PublicKey
	now func() time.Time
}

// NewSendGrid returns a verifier for the base64 public key (DER, PKIX);
// now is the clock. The key is parsed here, not with eventwebhook's
// ConvertPublicKeyBase64ToECDSA, which panics on a key that is not ECDSA.
func NewSendGrid(publicKey string, now func() time.Time) (*SendGrid, error) {
	der, err := base64.StdEncoding.DecodeString(publicKey)
	if err != nil {
		return nil, fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: not base64: %w", err)
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: not a public key: %w", err)
	}
	key, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("SENDGRID_WEBHOOK_PUBLIC_KEY: a %T, want an ECDSA key", pub)
	}
	return &SendGrid{key: key, now: now}, nil
}

// Verify checks a SendGrid webhook's headers and raw body.
func (s *SendGrid) Verify(h http.Header, body []byte) error {
	sig, ts := h.Get(eventwebhook.VerificationHTTPHeader), h.Get(eventwebhook.TimestampHTTPHeader)
	if sig == "" || ts == "" {
		return refuse("sendgrid", "%s and %s are required", eventwebhook.VerificationHTTPHeader, eventwebhook.TimestampHTTPHeader)
	}
	if ok, err := eventwebhook.VerifySignature(s.key, body, sig, ts); err != nil || !ok {
		return refuse("sendgrid", "the signature does not match the public key")
	}
	secs, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return refuse("sendgrid", "timestamp %q is not Unix seconds", ts)
	}
	return fresh("sendgrid", time.Unix(secs, 0), s.now())
}
