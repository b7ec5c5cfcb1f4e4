// Package webhooktest signs delivery events as each provider does, with
// keys a test makes, and serves an SNS signing certificate locally: for
// the verifiers' tests (providers/webhook) and the end-to-end tests of
// POST /webhooks/{provider}. The schemes are written out here from the
// providers' documentation, not by calling the code under test.
package webhooktest

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/providers/webhook"
)

// MailgunSignature is the "signature" object of a Mailgun webhook signed
// with key at at with token: HMAC-SHA256 of timestamp and token, hex.
func MailgunSignature(key string, at time.Time, token string) map[string]any {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(key))
	mac.Write([]byte(ts + token))
	return map[string]any{"timestamp": ts, "token": token, "signature": hex.EncodeToString(mac.Sum(nil))}
}

// SendGridKey is a new ECDSA P-256 key pair and its public key as
// SendGrid shows it (base64 of the DER), SENDGRID_WEBHOOK_PUBLIC_KEY.
func SendGridKey(tb testing.TB) (*ecdsa.PrivateKey, string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return key, base64.StdEncoding.EncodeToString(der)
}

// SendGridHeaders signs body as SendGrid's Event Webhook does: ECDSA over
// SHA-256 of timestamp and body, ASN.1, base64.
func SendGridHeaders(tb testing.TB, key *ecdsa.PrivateKey, at time.Time, body []byte) http.Header {
	tb.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	d := sha256.Sum256(append([]byte(ts), body...))
	r, s, err := ecdsa.Sign(rand.Reader, key, d[:])
	if err != nil {
		tb.Fatal(err)
	}
	sig, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
	if err != nil {
		tb.Fatal(err)
	}
	h := http.Header{}
	h.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
	h.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
	return h
}

// ResendSecret is a new signing secret and its whsec_ form,
// RESEND_WEBHOOK_SECRET.
func ResendSecret() ([]byte, string) {
	secret := make([]byte, 24)
	_, _ = rand.Read(secret)
	return secret, "whsec_" + base64.StdEncoding.EncodeToString(secret)
}

// ResendHeaders signs body as Svix does for Resend: HMAC-SHA256 of
// id.timestamp.body with the secret's bytes, "v1,<base64>".
func ResendHeaders(secret []byte, id string, at time.Time, body []byte) http.Header {
	ts := strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(id + "." + ts + "." + string(body)))
	h := http.Header{}
	h.Set("svix-id", id)
	h.Set("svix-timestamp", ts)
	h.Set("svix-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	return h
}

// SNS's certificate, as a test serves it.
const (
	Topic    = "arn:aws:sns:us-east-1:123456789012:ses-events"
	Host     = "https://sns.us-east-1.amazonaws.com"
	CertPath = "/SimpleNotificationService-7506a1e35b36ef5a444dd1a8e7cc3ed8.pem"
)

// SNS is SNS as a test sees it: a certificate of a key made here, served
// by a local TLS server that Fetch reaches for SNS's host in us-east-1,
// counting what it serves.
type SNS struct {
	Key     *rsa.PrivateKey
	Fetches atomic.Int64 // certificates served
	Gets    chan string  // paths and queries read, in order
	// Fetch is the fetcher to inject (webhook.NewSNS, app.WithCertFetcher):
	// a URL on Host is read from the local server, any other fails the
	// test.
	Fetch func(ctx context.Context, url string) ([]byte, error)
}

// NewSNS serves a certificate valid from notBefore to notAfter.
func NewSNS(tb testing.TB, notBefore, notAfter time.Time) *SNS {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: notBefore, NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	f := &SNS{Key: key, Gets: make(chan string, 16)}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case f.Gets <- r.URL.RequestURI():
		default:
		}
		if r.URL.Path == CertPath {
			f.Fetches.Add(1)
			_ = pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
	}))
	tb.Cleanup(srv.Close)
	fetch := webhook.Fetcher(srv.Client())
	f.Fetch = func(ctx context.Context, u string) ([]byte, error) {
		if !strings.HasPrefix(u, Host+"/") {
			tb.Errorf("fetched %s, which is not SNS's in us-east-1", u)
			return nil, context.Canceled
		}
		return fetch(ctx, srv.URL+strings.TrimPrefix(u, Host))
	}
	return f
}

// ToSign is the string SNS signs, as AWS documents it: each present field
// of the message's type as "name\nvalue\n", in this order.
func ToSign(m map[string]string) string {
	names := []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	if m["Type"] != "Notification" {
		names = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, n := range names {
		if v, ok := m[n]; ok {
			b.WriteString(n + "\n" + v + "\n")
		}
	}
	return b.String()
}

// Sign signs m with version "1" (SHA1withRSA) or "2" (SHA256withRSA) over
// signed (ToSign(m) unless given), and returns it as SNS posts it, with
// this certificate's URL.
func (f *SNS) Sign(tb testing.TB, m map[string]string, version string, signed ...string) []byte {
	tb.Helper()
	s := ToSign(m)
	if len(signed) > 0 {
		s = signed[0]
	}
	var (
		hash crypto.Hash
		d    []byte
	)
	if version == "1" {
		sum := sha1.Sum([]byte(s))
		hash, d = crypto.SHA1, sum[:]
	} else {
		sum := sha256.Sum256([]byte(s))
		hash, d = crypto.SHA256, sum[:]
	}
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.Key, hash, d)
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]string{"SignatureVersion": version, "Signature": base64.StdEncoding.EncodeToString(sig),
		"SigningCertURL": Host + CertPath}
	for k, v := range m {
		out[k] = v
	}
	b, err := json.Marshal(out)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
