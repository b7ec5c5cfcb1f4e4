package webhook_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/webhooktest"
	"github.com/nornweave/nornweave/providers/webhook"
)

// now is the verifiers' clock in these tests, but Resend's, which reads
// the system clock (resend-go's Verify).
var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func clock() time.Time { return now }

func wantRefused(t *testing.T, what string, err error, reason string) {
	t.Helper()
	var se *webhook.SignatureError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, reason) {
		t.Errorf("%s: %v, want a SignatureError saying %q", what, err, reason)
	}
}

// mailgunBody is a Mailgun webhook body signed with key
// (webhooktest.MailgunSignature).
func mailgunBody(key string, at time.Time, token string) []byte {
	b, _ := json.Marshal(map[string]any{"signature": webhooktest.MailgunSignature(key, at, token),
		"event-data": map[string]any{"event": "failed", "severity": "permanent", "recipient": "gone@example.com",
			"id": "CPgfbmQMTCKtHW6uIWtuVe", "message": map[string]any{"headers": map[string]any{"message-id": "abc@acme.test"}}}})
	return b
}

func TestMailgun(t *testing.T) {
	key := hex.EncodeToString(random(32))
	v := webhook.NewMailgun(key, clock)
	if err := v.Verify(mailgunBody(key, now.Add(-time.Minute), "t1")); err != nil {
		t.Fatalf("a signed event: %v", err)
	}
	wantRefused(t, "the same token again", v.Verify(mailgunBody(key, now.Add(-time.Minute), "t1")), "replay")
	wantRefused(t, "another key", v.Verify(mailgunBody("other", now, "t2")), "does not match")
	wantRefused(t, "six minutes old", v.Verify(mailgunBody(key, now.Add(-6*time.Minute), "t3")), "outside")
	wantRefused(t, "six minutes ahead", v.Verify(mailgunBody(key, now.Add(6*time.Minute), "t4")), "outside")
	wantRefused(t, "no signature", v.Verify([]byte(`{"event-data": {}}`)), "required")
	wantRefused(t, "not JSON", v.Verify([]byte(`signature=x`)), "not Mailgun's JSON")
	// The event data is not signed (Mailgun signs timestamp and token):
	// a signed envelope around other data passes the signature, once.
	if err := v.Verify(mailgunBody(key, now, "t5")); err != nil {
		t.Fatalf("a second signed event: %v", err)
	}
}

func TestSendGrid(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	v, err := webhook.NewSendGrid(base64.StdEncoding.EncodeToString(der), clock)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`[{"email":"gone@example.com","timestamp":1764158400,"event":"bounce","type":"bounce",` +
		`"sg_event_id":"ZGVsaXZlcmVk","sg_message_id":"14c5d75ce93.dfd.64b469.filter0001.16648.5515E0B88.0",` +
		`"reason":"550 5.1.1 The email account that you tried to reach does not exist"}]` + "\r\n")
	if err := v.Verify(webhooktest.SendGridHeaders(t, key, now, body), body); err != nil {
		t.Fatalf("a signed batch: %v", err)
	}
	tampered := append([]byte(nil), body...)
	tampered[10] ^= 1
	wantRefused(t, "a byte of the body changed", v.Verify(webhooktest.SendGridHeaders(t, key, now, body), tampered), "does not match")
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	wantRefused(t, "another key", v.Verify(webhooktest.SendGridHeaders(t, other, now, body), body), "does not match")
	wantRefused(t, "signed six minutes ago", v.Verify(webhooktest.SendGridHeaders(t, key, now.Add(-6*time.Minute), body), body), "outside")
	wantRefused(t, "no headers", v.Verify(http.Header{}, body), "required")

	if _, err := webhook.NewSendGrid(base64.StdEncoding.EncodeToString(random(40)), clock); err == nil {
		t.Error("a public key of random bytes was accepted")
	}
}

func TestResend(t *testing.T) {
	secret := random(24)
	v, err := webhook.NewResend("whsec_" + base64.StdEncoding.EncodeToString(secret))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"email.bounced","created_at":"2026-11-26T12:00:00.000Z","data":{"email_id":"4ef9a417-02e9-4d39-ad75-9611e0fcc33c",` +
		`"to":["gone@example.com"],"bounce":{"type":"Permanent","subType":"General","message":"550 5.1.1 user unknown"}}}`)
	at := time.Now() // resend-go checks against the system clock
	if err := v.Verify(webhooktest.ResendHeaders(secret, "msg_1", at, body), body); err != nil {
		t.Fatalf("a signed event: %v", err)
	}
	wantRefused(t, "another secret", v.Verify(webhooktest.ResendHeaders(random(24), "msg_1", at, body), body), "no matching signature")
	wantRefused(t, "the id changed", v.Verify(func() http.Header {
		h := webhooktest.ResendHeaders(secret, "msg_1", at, body)
		h.Set("svix-id", "msg_2")
		return h
	}(), body), "no matching signature")
	wantRefused(t, "signed ten minutes ago", v.Verify(webhooktest.ResendHeaders(secret, "msg_1", at.Add(-10*time.Minute), body), body), "tolerance")
	wantRefused(t, "no headers", v.Verify(http.Header{}, body), "required")

	for _, bad := range []string{"", "whsec_", "secret", "whsec_!!!"} {
		if _, err := webhook.NewResend(bad); err == nil {
			t.Errorf("NewResend(%q) accepted", bad)
		}
	}
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}
