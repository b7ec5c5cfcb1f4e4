// Package notify delivers NornWeave's own events to the endpoints an
// application registers (webhooks out, issue 30): one POST per event and
// endpoint, signed by the Standard Webhooks spec, through an HTTP client
// that will not reach into the operator's own network.
//
// It is the outbound half of what providers/webhook is inbound: it knows
// HTTP, the signature and the answer's meaning (delivered, retry later,
// snooze, gone), and nothing of messages, jobs or retries' bookkeeping,
// which its caller keeps.
package notify

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// secretPrefix marks a signing secret, as Svix and the spec's libraries
// write it.
const secretPrefix = "whsec_"

// secretLen is the bytes of a secret NewSecret makes: 192 bits, as Svix's.
const secretLen = 24

// minSecretLen is the shortest key a Signer accepts: the spec's library
// accepts an empty one, which would sign with a key anyone knows.
const minSecretLen = 16

// NewSecret makes a signing secret, whsec_ and the base64 of random bytes.
func NewSecret() (string, error) {
	b := make([]byte, secretLen)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return secretPrefix + base64.StdEncoding.EncodeToString(b), nil
}

// Signer signs an event's body with every secret it holds: during a
// rotation the old one beside the new, so that a receiver that has either
// verifies it (a webhook-signature header carries each, space-separated).
// It is immutable and safe for concurrent use.
type Signer struct {
	hooks []*standardwebhooks.Webhook
}

// NewSigner returns a Signer of secrets (whsec_…, at least one). A secret
// that is not base64, or shorter than 16 bytes, is refused.
func NewSigner(secrets ...string) (*Signer, error) {
	if len(secrets) == 0 {
		return nil, errors.New("notify: no signing secret")
	}
	s := &Signer{}
	for _, sec := range secrets {
		key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sec, secretPrefix))
		if err != nil || !strings.HasPrefix(sec, secretPrefix) {
			return nil, errors.New("notify: a signing secret is whsec_ and base64")
		}
		if len(key) < minSecretLen {
			return nil, fmt.Errorf("notify: a signing secret of %d bytes, want at least %d", len(key), minSecretLen)
		}
		wh, err := standardwebhooks.NewWebhookRaw(key)
		if err != nil {
			return nil, err
		}
		s.hooks = append(s.hooks, wh)
	}
	return s, nil
}

// Headers are the spec's headers for body sent as message id at at:
// webhook-id, webhook-timestamp and webhook-signature, which holds one
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>" per secret. A replay of
// an event carries its first id: receivers deduplicate by it.
func (s *Signer) Headers(id string, at time.Time, body []byte) (http.Header, error) {
	sigs := make([]string, len(s.hooks))
	for i, wh := range s.hooks {
		sig, err := wh.Sign(id, at, body)
		if err != nil {
			return nil, err
		}
		sigs[i] = sig
	}
	h := http.Header{}
	h.Set(standardwebhooks.HeaderWebhookID, id)
	h.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(at.Unix(), 10))
	h.Set(standardwebhooks.HeaderWebhookSignature, strings.Join(sigs, " "))
	h.Set("Content-Type", "application/json")
	return h, nil
}
