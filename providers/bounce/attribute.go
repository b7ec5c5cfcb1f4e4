package bounce

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/nornweave/nornweave/providers/webhook"
)

// ErrUnattributed: the message is a DSN, but not one that can be pinned on
// a message of ours and one of its recipients: it came to no VERP address
// with a valid token, to tokens of different messages, or reports only
// recipients the token was not made for. It is not a bounce.
var ErrUnattributed = errors.New("notification names no message and recipient of ours")

// Bounce is one event of a notification, attributed to one of our
// messages by its VERP token.
type Bounce struct {
	// MessageID is our message's id (the token's), not a provider's.
	MessageID string
	// AnyRecipient says the token was made for any recipient of the
	// message (VERP.AnyRecipient): the caller checks that Event.Recipient
	// is one of them.
	AnyRecipient bool
	// Event is the event, in the webhook model. Its ID is stable (the
	// same notification read twice gives the same ID), Recipient is the
	// canonical address (address.Address.Key), and ProviderMessageID is
	// empty: the returned headers that would give one are the remote
	// server's copy and prove nothing; MessageID is the key.
	Event webhook.Event
}

// maxClockSkew is how far in the future a date in a notification may be
// and still be believed; later ones, and dates before minDate, fall back
// to the next date available, and at last to now.
const maxClockSkew = 24 * time.Hour

var minDate = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Attribute reads raw as a DSN (ParseDSN) and returns its events for the
// recipient its VERP token was made for. The token is looked for in the
// addresses the DSN was sent to (Report.Envelope); every one that is a
// VERP address must be valid and name the same message and recipient. A
// recipient group counts if its Original-Recipient or Final-Recipient is
// the token's recipient. Each counted group gives one event:
//
//   - Action failed with a 5.x.x status: Bounced, Hard (it suppresses);
//   - Action failed with a 4.x.x status, or Action delayed: Delayed (the
//     server gave up or is still trying on a temporary failure: never a
//     suppression);
//   - Action delivered: Delivered (sent only to a sender that asked for
//     success notices, which the SMTP provider does not, but true);
//   - Action relayed or expanded, a failed group without a status, and
//     anything else: no event (the message went beyond DSN's reach, or the
//     report does not say how it failed).
//
// OccurredAt is the group's Last-Attempt-Date, else the Arrival-Date, else
// the DSN's Date, else now. Attribute answers ErrNotDSN, ErrTooLarge or
// ErrUnattributed (wrapped; ErrForged is wrapped too when a forged token
// was seen) when there is no event; the caller leaves such a message alone.
func (v *VERP) Attribute(raw []byte, now time.Time) ([]Bounce, error) {
	r, err := ParseDSN(raw)
	if err != nil {
		return nil, err
	}
	tok, err := v.token(r.Envelope)
	if err != nil {
		return nil, err
	}
	base := r.MessageID
	if base == "" {
		base = string(raw)
	}
	sum := sha256.Sum256([]byte(base))
	idBase := "dsn/" + hex.EncodeToString(sum[:16]) + "/"

	var out []Bounce
	seen := map[string]bool{}
	for _, rs := range r.Recipients {
		rcpt := v.recipient(tok, rs)
		if rcpt == "" {
			continue
		}
		e := webhook.Event{Recipient: rcpt, SMTPStatus: rs.Status, Diagnostic: rs.Diagnostic}
		switch {
		case rs.Action == "failed" && rs.Status != "" && rs.Status[0] == '5':
			e.Type, e.BounceType = webhook.Bounced, webhook.Hard
		case rs.Action == "failed" && rs.Status != "" && rs.Status[0] == '4', rs.Action == "delayed":
			e.Type = webhook.Delayed
		case rs.Action == "delivered":
			e.Type = webhook.Delivered
		default:
			continue
		}
		if seen[rcpt] {
			continue // one recipient, one event per notification
		}
		seen[rcpt] = true
		e.ID = idBase + rcpt
		e.OccurredAt = firstDate(now, rs.LastAttemptDate, r.ArrivalDate, r.Date)
		out = append(out, Bounce{MessageID: tok.MessageID, AnyRecipient: v.AnyRecipient(tok), Event: e})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("bounce: %w: no failed, delayed or delivered group for the token's recipient", ErrUnattributed)
	}
	return out, nil
}

// token is the one VERP token the envelope addresses hold.
func (v *VERP) token(envelope []string) (Token, error) {
	var (
		found  *Token
		forged error
	)
	for _, a := range envelope {
		t, err := v.Parse(a)
		switch {
		case errors.Is(err, ErrNotVERP):
			continue
		case err != nil:
			forged = err
		case found == nil:
			found = &t
		case *found != t:
			return Token{}, fmt.Errorf("bounce: %w: tokens of different messages or recipients", ErrUnattributed)
		}
	}
	switch {
	case forged != nil:
		// A forged token beside a valid one is still a forgery: whoever
		// wrote one may have copied the other.
		return Token{}, fmt.Errorf("bounce: %w: %w", ErrUnattributed, forged)
	case found == nil:
		return Token{}, fmt.Errorf("bounce: %w: sent to no VERP address", ErrUnattributed)
	}
	return *found, nil
}

// recipient is the canonical address of the group's recipient if the
// token was made for it (or for any recipient), else empty. The Original-Recipient is tried
// first: after forwarding, the Final-Recipient is another address.
func (v *VERP) recipient(t Token, rs RecipientStatus) string {
	anyone := v.AnyRecipient(t)
	for _, a := range []string{rs.OriginalRecipient, rs.FinalRecipient} {
		if a == "" || !anyone && !v.IsFor(t, a) {
			continue
		}
		if c, err := canonical(a); err == nil {
			return c
		}
	}
	return ""
}

// firstDate is the first plausible date of dates, else now.
func firstDate(now time.Time, dates ...time.Time) time.Time {
	for _, d := range dates {
		if !d.Before(minDate) && !d.After(now.Add(maxClockSkew)) {
			return d.UTC()
		}
	}
	return now.UTC()
}
