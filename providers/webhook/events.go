package webhook

import (
	"strings"
	"time"
	"unicode/utf8"
)

// Event types: one recipient's delivery state as a provider reports it.
const (
	Delivered  = "delivered"
	Bounced    = "bounced"
	Complained = "complained"
	Delayed    = "delayed"
	Failed     = "failed"
	Opened     = "opened"
	Clicked    = "clicked"
	Suppressed = "suppressed" // by the provider's own list: not sent
)

// Bounce types: a hard bounce (the address does not take mail) suppresses
// it; a soft one (full mailbox, greylisting, a blocked IP) does not.
const (
	Hard = "hard"
	Soft = "soft"
)

// maxDiagnostic bounds the diagnostic text kept of an event: the
// provider's, the remote server's reply, which a hostile or broken server
// can make as long as it likes.
const maxDiagnostic = 1000

// Event is one delivery event for one recipient, in the provider's terms
// mapped to ours.
type Event struct {
	// ID names the event at the provider, unique per recipient: an event
	// seen before is recognised by it (a retry, or a replay).
	ID   string
	Type string
	// BounceType is Hard or Soft for Bounced.
	BounceType string
	Recipient  string
	// ProviderMessageID is the message's id as the provider's send API
	// returned it, which NornWeave stored as provider_message_id.
	ProviderMessageID string
	OccurredAt        time.Time
	// SMTPStatus is the enhanced status code (5.1.1) or reply code (550),
	// when the provider gives one.
	SMTPStatus string
	Diagnostic string
}

// diagnostic cuts s to maxDiagnostic bytes on a rune boundary.
func diagnostic(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxDiagnostic {
		return s
	}
	s = s[:maxDiagnostic]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s
}

// bounceType is Hard for a 5.x.x status, or a reply code 5xx, Soft
// otherwise: a provider that does not say is read by the code.
func bounceType(status string) string {
	if strings.HasPrefix(strings.TrimSpace(status), "5") {
		return Hard
	}
	return Soft
}
