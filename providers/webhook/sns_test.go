package webhook_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/providers/webhook"
)

const (
	topic    = "arn:aws:sns:us-east-1:123456789012:ses-events"
	snsHost  = "https://sns.us-east-1.amazonaws.com"
	certPath = "/SimpleNotificationService-7506a1e35b36ef5a444dd1a8e7cc3ed8.pem"
)

// snsFixture is SNS as a test sees it: a certificate of a key made here,
// served by a local server that the verifier's injected fetcher reaches
// for SNS's host in us-east-1, counting what it serves.
type snsFixture struct {
	key     *rsa.PrivateKey
	fetches atomic.Int64
	gets    chan string // paths and queries read, in order
	v       *webhook.SNS
}

func newSNS(t *testing.T, notAfter time.Time) *snsFixture {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	f := &snsFixture{key: key, gets: make(chan string, 16)}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.gets <- r.URL.RequestURI()
		if r.URL.Path == certPath {
			f.fetches.Add(1)
			_ = pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
		}
	}))
	t.Cleanup(srv.Close)
	fetch := webhook.Fetcher(srv.Client())
	v, err := webhook.NewSNS([]string{topic}, func(ctx context.Context, u string) ([]byte, error) {
		if !strings.HasPrefix(u, snsHost+"/") {
			t.Errorf("fetched %s, which is not SNS's in us-east-1", u)
			return nil, context.Canceled
		}
		return fetch(ctx, srv.URL+strings.TrimPrefix(u, snsHost))
	}, clock)
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
}

// toSign is the string SNS signs, written out here as AWS documents it
// rather than calling the code under test.
func toSign(m map[string]string) string {
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

// sign signs m with version "1" (SHA1withRSA) or "2" (SHA256withRSA) over
// signed (toSign(m) unless given), and returns it as SNS posts it.
func (f *snsFixture) sign(t *testing.T, m map[string]string, version string, signed ...string) []byte {
	t.Helper()
	s := toSign(m)
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
	sig, err := rsa.SignPKCS1v15(rand.Reader, f.key, hash, d)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{"SignatureVersion": version, "Signature": base64.StdEncoding.EncodeToString(sig),
		"SigningCertURL": snsHost + certPath}
	for k, v := range m {
		out[k] = v
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// bounce is an SES bounce notification as SNS carries it: the SES event is
// a JSON string with its own newlines and quotes.
func bounce() map[string]string {
	return map[string]string{
		"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324", "TopicArn": topic,
		"Message": "{\"notificationType\":\"Bounce\",\"bounce\":{\"bounceType\":\"Permanent\",\"bouncedRecipients\":" +
			"[{\"emailAddress\":\"gone@example.com\",\"status\":\"5.1.1\",\"diagnosticCode\":\"smtp; 550 5.1.1 user unknown\"}]}," +
			"\n\"mail\":{\"messageId\":\"0100018c-abc\"}}",
		"Timestamp": "2026-11-26T11:59:58.123Z",
	}
}

func TestSNSVerifies(t *testing.T) {
	f := newSNS(t, now.Add(365*24*time.Hour))
	ctx := context.Background()
	withSubject := bounce()
	withSubject["Subject"] = "Amazon SES Email Event Notification"
	for name, body := range map[string][]byte{
		"version 2, no Subject":   f.sign(t, bounce(), "2"),
		"version 1, with Subject": f.sign(t, withSubject, "1"),
	} {
		m, err := f.v.Verify(ctx, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.MessageID != bounce()["MessageId"] || m.Message != bounce()["Message"] {
			t.Errorf("%s: read %+v", name, m)
		}
	}
	if n := f.fetches.Load(); n != 1 {
		t.Errorf("the certificate was fetched %d times for two messages, want once (kept)", n)
	}

	tampered := bounce()
	signed := toSign(tampered)
	tampered["Message"] = strings.Replace(tampered["Message"], "Permanent", "Transient", 1)
	_, err := f.v.Verify(ctx, f.sign(t, tampered, "2", signed))
	wantRefused(t, "the event changed after signing", err, "does not match")

	// The string to sign ends with a newline: a signature over it without
	// that newline is not SNS's (another project dropped all SES events
	// by building it so).
	_, err = f.v.Verify(ctx, f.sign(t, bounce(), "2", strings.TrimSuffix(toSign(bounce()), "\n")))
	wantRefused(t, "signed without the last newline", err, "does not match")

	_, err = f.v.Verify(ctx, f.sign(t, bounce(), "3"))
	wantRefused(t, "SignatureVersion 3", err, "want 1 or 2")
}

// A message is refused before anything is fetched when its topic is not
// allowed or its certificate URL is not SNS's, in the topic's region.
func TestSNSRefusesForeignTopicsAndCertificates(t *testing.T) {
	f := newSNS(t, now.Add(365*24*time.Hour))
	ctx := context.Background()
	foreign := bounce()
	foreign["TopicArn"] = "arn:aws:sns:us-east-1:999999999999:ses-events"
	_, err := f.v.Verify(ctx, f.sign(t, foreign, "2"))
	wantRefused(t, "a topic outside the allow-list", err, "not in SES_SNS_TOPIC_ARNS")

	for _, u := range []string{
		"https://sns.us-east-1.amazonaws.com.evil.test" + certPath,
		"https://evil.test/sns.us-east-1.amazonaws.com" + certPath,
		"http://sns.us-east-1.amazonaws.com" + certPath,
		"https://sns.eu-west-1.amazonaws.com" + certPath, // another region than the topic's
		"https://sns.us-east-1.amazonaws.com:8443" + certPath,
		"https://user@sns.us-east-1.amazonaws.com" + certPath,
		"https://sns.us-east-1.amazonaws.com/cert.txt",
		"https://sns.us-east-1.amazonaws.com" + certPath + "?redirect=https://evil.test/x.pem",
	} {
		var m map[string]any
		if err := json.Unmarshal(f.sign(t, bounce(), "2"), &m); err != nil {
			t.Fatal(err)
		}
		m["SigningCertURL"] = u
		body, _ := json.Marshal(m)
		_, err := f.v.Verify(ctx, body)
		var se *webhook.SignatureError
		if !errors.As(err, &se) {
			t.Errorf("certificate URL %s: %v, want refused", u, err)
		}
	}
	if n := f.fetches.Load(); n != 0 {
		t.Errorf("%d certificates fetched for refused messages, want none", n)
	}
}

func TestSNSSubscriptionConfirmation(t *testing.T) {
	f := newSNS(t, now.Add(365*24*time.Hour))
	ctx := context.Background()
	sub := map[string]string{
		"Type": "SubscriptionConfirmation", "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b", "TopicArn": topic,
		"Token":        "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
		"Message":      "You have chosen to subscribe to the topic " + topic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL": snsHost + "/?Action=ConfirmSubscription&TopicArn=" + topic + "&Token=2336412f37",
		"Timestamp":    "2026-11-26T11:59:58.123Z",
	}
	m, err := f.v.Verify(ctx, f.sign(t, sub, "2"))
	if err != nil {
		t.Fatal(err)
	}
	<-f.gets // the certificate
	if err := f.v.Confirm(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := <-f.gets; !strings.HasPrefix(got, "/?Action=ConfirmSubscription&TopicArn="+topic) {
		t.Errorf("confirmed with GET %s", got)
	}
	m.SubscribeURL = "https://evil.test/?Action=ConfirmSubscription"
	if err := f.v.Confirm(ctx, m); err == nil {
		t.Error("a SubscribeURL on another host was read")
	}
}

func TestSNSExpiredCertificate(t *testing.T) {
	f := newSNS(t, now.Add(-time.Minute))
	_, err := f.v.Verify(context.Background(), f.sign(t, bounce(), "2"))
	wantRefused(t, "a certificate expired a minute ago", err, "valid from")
}

// Fetcher follows no redirect: the certificate is SNS's answer itself.
func TestFetcherRefusesRedirects(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved.pem" {
			http.Redirect(w, r, "/elsewhere.pem", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("elsewhere"))
	}))
	defer srv.Close()
	fetch := webhook.Fetcher(srv.Client())
	if b, err := fetch(context.Background(), srv.URL+"/moved.pem"); err == nil {
		t.Errorf("a redirect was followed: %q", b)
	}
	if b, err := fetch(context.Background(), srv.URL+"/here.pem"); err != nil || string(b) != "elsewhere" {
		t.Errorf("a plain GET: %q, %v", b, err)
	}
}
