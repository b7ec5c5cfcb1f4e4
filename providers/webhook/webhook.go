// Package webhook verifies the delivery events each provider posts to
// NornWeave (POST /webhooks/{provider}): by the provider's own signature,
// never by the API key, and before anything of the event is used. Where
// the provider publishes a verifier it is used (mailgun-go, sendgrid-go's
// eventwebhook, resend-go's Svix check); SNS, which carries SES's events
// and has no maintained Go verifier, is verified here (SNS).
//
// Each verifier answers nil or a *SignatureError (the request is not the
// provider's: 401 invalid_signature). Replays within a verifier's window
// are refused where the provider gives a token for it (Mailgun); for the
// others an event is identified by the provider's own id, and one seen
// before is recognised where it is stored.
package webhook

import (
	"fmt"
	"time"
)

// Tolerance is how far a signed timestamp may be from now, either way:
// five minutes, Svix's and Resend's tolerance, applied to every provider
// that signs one.
const Tolerance = 5 * time.Minute

// SignatureError says a request is not what its provider signed: a
// signature missing, wrong or made with another key, a timestamp outside
// Tolerance, a token seen before, or (SNS) a certificate or topic that is
// not the configured one.
type SignatureError struct {
	Provider string
	Reason   string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("%s webhook: invalid signature: %s", e.Provider, e.Reason)
}

func refuse(provider, format string, args ...any) error {
	return &SignatureError{Provider: provider, Reason: fmt.Sprintf(format, args...)}
}

// fresh refuses a signed time more than Tolerance from now.
func fresh(provider string, signed, now time.Time) error {
	if d := now.Sub(signed); d > Tolerance || d < -Tolerance {
		return refuse(provider, "timestamp %s is %v from now, outside %v", signed.UTC().Format(time.RFC3339), d.Round(time.Second), Tolerance)
	}
	return nil
}
