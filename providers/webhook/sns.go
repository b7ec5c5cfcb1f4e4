package webhook

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha1" // SignatureVersion 1 is SHA1withRSA: only to verify what SNS signs so
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// SNS message types.
const (
	SNSNotification        = "Notification"
	SNSSubscriptionConfirm = "SubscriptionConfirmation"
	SNSUnsubscribeConfirm  = "UnsubscribeConfirmation"
)

// SNSMessage is an Amazon SNS message as its HTTP(S) subscription posts it.
type SNSMessage struct {
	Type             string
	MessageID        string `json:"MessageId"`
	Token            string
	TopicArn         string
	Subject          string
	Message          string
	Timestamp        string
	SignatureVersion string
	Signature        string
	SigningCertURL   string `json:"SigningCertURL"`
	SubscribeURL     string `json:"SubscribeURL"`
}

// maxCerts bounds the certificates an SNS verifier keeps: SNS signs with
// one per region at a time, rotated rarely.
const maxCerts = 16

// maxCertSize bounds a certificate read from SNS.
const maxCertSize = 64 << 10

// SNS verifies Amazon SNS messages, the way SES's events arrive, as AWS
// documents it (no maintained Go verifier exists):
//
//   - the topic must be one of Topics (SES_SNS_TOPIC_ARNS): anyone may make
//     a topic of their own, and SNS would sign their forged bounces too;
//   - the certificate URL must be https://sns.<region>.amazonaws.com/….pem
//     in the topic's region, and is fetched without following a redirect;
//     certificates are kept by URL;
//   - the signature (SignatureVersion 1: SHA1withRSA, 2: SHA256withRSA) is
//     over the string to sign built exactly, every "name\nvalue\n" pair in
//     AWS's order, the last newline included.
//
// A certificate comes only from that host over HTTPS with the system's
// roots; its chain is not verified beyond that, as AWS's SDK validators
// do not. SNS retries a message for as long as its delivery policy says,
// so no age is imposed: MessageId names it, and one seen before is
// recognised where events are stored.
type SNS struct {
	topics []string
	fetch  func(ctx context.Context, url string) ([]byte, error)
	now    func() time.Time

	mu    sync.Mutex
	certs map[string]*x509.Certificate
}

// NewSNS returns a verifier that accepts the topics (SNS topic ARNs, an
// error otherwise); fetch reads a URL (a certificate, or a subscription's
// confirmation), nil for HTTPS that follows no redirect (tests pass one
// that reaches a local server); now is the clock.
func NewSNS(topics []string, fetch func(ctx context.Context, url string) ([]byte, error), now func() time.Time) (*SNS, error) {
	for _, t := range topics {
		if _, err := topicRegion(t); err != nil {
			return nil, fmt.Errorf("%q is not an SNS topic ARN (arn:aws:sns:<region>:<account>:<name>)", t)
		}
	}
	if fetch == nil {
		fetch = Fetcher(&http.Client{Timeout: 10 * time.Second})
	}
	return &SNS{topics: slices.Clone(topics), fetch: fetch, now: now, certs: map[string]*x509.Certificate{}}, nil
}

// Fetcher reads a URL with c, refusing a redirect and any answer but 200,
// and at most 64 KiB of it.
func Fetcher(c *http.Client) func(ctx context.Context, url string) ([]byte, error) {
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return errors.New("redirect refused") }
	return func(ctx context.Context, u string) ([]byte, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		res, err := nc.Do(req)
		if err != nil {
			return nil, err
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("GET %s: %s", u, res.Status)
		}
		return io.ReadAll(io.LimitReader(res.Body, maxCertSize))
	}
}

// Verify parses an SNS message and checks its topic, certificate and
// signature. A certificate that cannot be fetched is an error of its own
// (not a *SignatureError): SNS retries the message.
func (s *SNS) Verify(ctx context.Context, body []byte) (*SNSMessage, error) {
	var m SNSMessage
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, refuse("ses", "the body is not an SNS message: %v", err)
	}
	toSign, err := stringToSign(&m)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(s.topics, m.TopicArn) {
		return nil, refuse("ses", "topic %q is not in SES_SNS_TOPIC_ARNS", m.TopicArn)
	}
	region, err := topicRegion(m.TopicArn)
	if err != nil {
		return nil, err
	}
	if err := awsURL(m.SigningCertURL, region, true); err != nil {
		return nil, err
	}
	var hash crypto.Hash
	switch m.SignatureVersion {
	case "1":
		hash = crypto.SHA1
	case "2":
		hash = crypto.SHA256
	default:
		return nil, refuse("ses", "SignatureVersion %q, want 1 or 2", m.SignatureVersion)
	}
	sig, err := base64.StdEncoding.DecodeString(m.Signature)
	if err != nil {
		return nil, refuse("ses", "Signature is not base64")
	}
	cert, err := s.cert(ctx, m.SigningCertURL)
	if err != nil {
		return nil, err
	}
	if now := s.now(); now.Before(cert.NotBefore) || now.After(cert.NotAfter) {
		return nil, refuse("ses", "the signing certificate is valid from %s to %s", cert.NotBefore, cert.NotAfter)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, refuse("ses", "the signing certificate's key is a %T, want RSA", cert.PublicKey)
	}
	if err := rsa.VerifyPKCS1v15(pub, hash, digest(hash, toSign), sig); err != nil {
		return nil, refuse("ses", "the signature does not match the certificate")
	}
	return &m, nil
}

// Confirm confirms a verified SubscriptionConfirmation by reading its
// SubscribeURL, which must be SNS's in the topic's region.
func (s *SNS) Confirm(ctx context.Context, m *SNSMessage) error {
	if m.Type != SNSSubscriptionConfirm {
		return fmt.Errorf("ses webhook: confirm a %s", m.Type)
	}
	region, err := topicRegion(m.TopicArn)
	if err != nil {
		return err
	}
	if err := awsURL(m.SubscribeURL, region, false); err != nil {
		return err
	}
	_, err = s.fetch(ctx, m.SubscribeURL)
	return err
}

func (s *SNS) cert(ctx context.Context, u string) (*x509.Certificate, error) {
	s.mu.Lock()
	c := s.certs[u]
	s.mu.Unlock()
	if c != nil {
		return c, nil
	}
	raw, err := s.fetch(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("ses webhook: signing certificate: %w", err)
	}
	block, _ := pem.Decode(raw)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, refuse("ses", "%s holds no PEM certificate", u)
	}
	c, err = x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, refuse("ses", "%s: %v", u, err)
	}
	s.mu.Lock()
	if len(s.certs) >= maxCerts {
		clear(s.certs)
	}
	s.certs[u] = c
	s.mu.Unlock()
	return c, nil
}

func digest(h crypto.Hash, s string) []byte {
	if h == crypto.SHA1 {
		d := sha1.Sum([]byte(s))
		return d[:]
	}
	d := sha256.Sum256([]byte(s))
	return d[:]
}

// stringToSign is what SNS signs for m: for a notification Message,
// MessageId, Subject (only if present), Timestamp, TopicArn and Type; for
// a (un)subscription confirmation Message, MessageId, SubscribeURL,
// Timestamp, Token, TopicArn and Type; each as its name, a newline, its
// value and a newline, the last one too.
func stringToSign(m *SNSMessage) (string, error) {
	type pair struct{ name, value string }
	var pairs []pair
	switch m.Type {
	case SNSNotification:
		pairs = []pair{{"Message", m.Message}, {"MessageId", m.MessageID}}
		if m.Subject != "" {
			pairs = append(pairs, pair{"Subject", m.Subject})
		}
		pairs = append(pairs, pair{"Timestamp", m.Timestamp}, pair{"TopicArn", m.TopicArn}, pair{"Type", m.Type})
	case SNSSubscriptionConfirm, SNSUnsubscribeConfirm:
		pairs = []pair{{"Message", m.Message}, {"MessageId", m.MessageID}, {"SubscribeURL", m.SubscribeURL},
			{"Timestamp", m.Timestamp}, {"Token", m.Token}, {"TopicArn", m.TopicArn}, {"Type", m.Type}}
	default:
		return "", refuse("ses", "Type %q is not an SNS message type", m.Type)
	}
	var b strings.Builder
	for _, p := range pairs {
		b.WriteString(p.name)
		b.WriteByte('\n')
		b.WriteString(p.value)
		b.WriteByte('\n')
	}
	return b.String(), nil
}

// topicRegion is the region of an SNS topic ARN, arn:aws:sns:REGION:….
func topicRegion(arn string) (string, error) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sns" || !validRegion(parts[3]) {
		return "", refuse("ses", "TopicArn %q is not an SNS topic", arn)
	}
	return parts[3], nil
}

func validRegion(r string) bool {
	if r == "" {
		return false
	}
	for _, c := range r {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// awsURL refuses a URL that is not https://sns.REGION.amazonaws.com/…,
// with no user, port or fragment; a certificate's ends in .pem and has no
// query.
func awsURL(raw, region string, cert bool) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return refuse("ses", "URL %q: %v", raw, err)
	case u.Scheme != "https" || u.User != nil || u.Port() != "" || u.Fragment != "" || u.Opaque != "":
		return refuse("ses", "URL %q is not plain https", raw)
	case u.Hostname() != "sns."+region+".amazonaws.com":
		return refuse("ses", "URL %q is not SNS's in %s (sns.%s.amazonaws.com)", raw, region, region)
	case cert && (!strings.HasSuffix(u.Path, ".pem") || u.RawQuery != ""):
		return refuse("ses", "certificate URL %q is not a .pem file", raw)
	}
	return nil
}
