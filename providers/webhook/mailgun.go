package webhook

import (
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/mailgun/mailgun-go/v4"
)

// maxTokens bounds the Mailgun tokens remembered: those of the last
// 2×Tolerance, far more than a provider posts in that time. Full, a
// verifier refuses rather than forgets one (ErrTooManyTokens): a token
// forgotten inside its window could be replayed.
const maxTokens = 200_000

// ErrTooManyTokens says a Mailgun verifier remembers as many tokens as it
// may: the request is refused for now (503), and Mailgun retries it.
var ErrTooManyTokens = errors.New("mailgun webhook: too many tokens in the replay window; try again later")

// Mailgun verifies Mailgun's webhooks with mailgun-go's
// VerifyWebhookSignature: HMAC-SHA256 of timestamp and token with the
// webhook signing key (MAILGUN_WEBHOOK_SIGNING_KEY), in the JSON body's
// "signature". The signature covers no more than those two, so a
// timestamp must be within Tolerance and a token is refused the second
// time (by this server: a replay to another is an event seen before
// where events are stored).
type Mailgun struct {
	mg  *mailgun.MailgunImpl
	now func() time.Time

	mu     sync.Mutex
	seen   map[string]time.Time // token → its signed time
	pruned time.Time            // when seen was last swept
}

// NewMailgun returns a verifier for the signing key; now is the clock.
func NewMailgun(key string, now func() time.Time) *Mailgun {
	mg := mailgun.NewMailgun("", "")
	mg.SetWebhookSigningKey(key)
	return &Mailgun{mg: mg, now: now, seen: map[string]time.Time{}}
}

// Verify checks the body of a Mailgun webhook and remembers its token.
func (m *Mailgun) Verify(body []byte) error {
	var p struct {
		Signature mailgun.Signature `json:"signature"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return refuse("mailgun", "the body is not Mailgun's JSON: %v", err)
	}
	sig := p.Signature
	if sig.Token == "" || sig.TimeStamp == "" || sig.Signature == "" {
		return refuse("mailgun", "signature.timestamp, signature.token and signature.signature are required")
	}
	if ok, err := m.mg.VerifyWebhookSignature(sig); err != nil || !ok {
		return refuse("mailgun", "the signature does not match the signing key")
	}
	secs, err := strconv.ParseInt(sig.TimeStamp, 10, 64)
	if err != nil {
		return refuse("mailgun", "timestamp %q is not Unix seconds", sig.TimeStamp)
	}
	signed, now := time.Unix(secs, 0), m.now()
	if err := fresh("mailgun", signed, now); err != nil {
		return err
	}
	return m.remember(sig.Token, signed, now)
}

// remember records token, refusing one seen before, after forgetting those
// whose time has left the window (they are refused as stale anyway).
func (m *Mailgun) remember(token string, signed, now time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.seen[token]; ok {
		return refuse("mailgun", "token seen before (a replay)")
	}
	// A sweep reads every token: once a second at most, not per request.
	if len(m.seen) >= maxTokens/2 && now.Sub(m.pruned) >= time.Second {
		m.pruned = now
		for t, at := range m.seen {
			if now.Sub(at) > Tolerance || at.Sub(now) > Tolerance {
				delete(m.seen, t)
			}
		}
	}
	if len(m.seen) >= maxTokens {
		return ErrTooManyTokens
	}
	m.seen[token] = signed
	return nil
}

// Forget lets the token of body (verified) be used again: the request it
// came in could not be recorded (a 5xx), and Mailgun's retry of it must not
// be refused as a replay.
func (m *Mailgun) Forget(body []byte) {
	var p struct {
		Signature mailgun.Signature `json:"signature"`
	}
	if json.Unmarshal(body, &p) == nil {
		m.mu.Lock()
		delete(m.seen, p.Signature.Token)
		m.mu.Unlock()
	}
}
