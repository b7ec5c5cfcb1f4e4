package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/webhooktest"
	"github.com/nornweave/nornweave/providers/webhook"
)

const (
	topic    = webhooktest.Topic
	snsHost  = webhooktest.Host
	certPath = webhooktest.CertPath
)

// snsFixture is SNS's certificate served locally (webhooktest.SNS) and a
// verifier of topic whose fetcher reaches it.
type snsFixture struct {
	*webhooktest.SNS
	v *webhook.SNS
}

func newSNS(t *testing.T, notAfter time.Time) *snsFixture {
	t.Helper()
	f := &snsFixture{SNS: webhooktest.NewSNS(t, now.Add(-time.Hour), notAfter)}
	v, err := webhook.NewSNS([]string{topic}, f.Fetch, clock)
	if err != nil {
		t.Fatal(err)
	}
	f.v = v
	return f
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
		"version 2, no Subject":   f.Sign(t, bounce(), "2"),
		"version 1, with Subject": f.Sign(t, withSubject, "1"),
	} {
		m, err := f.v.Verify(ctx, body)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m.MessageID != bounce()["MessageId"] || m.Message != bounce()["Message"] {
			t.Errorf("%s: read %+v", name, m)
		}
	}
	if n := f.Fetches.Load(); n != 1 {
		t.Errorf("the certificate was fetched %d times for two messages, want once (kept)", n)
	}

	tampered := bounce()
	signed := webhooktest.ToSign(tampered)
	tampered["Message"] = strings.Replace(tampered["Message"], "Permanent", "Transient", 1)
	_, err := f.v.Verify(ctx, f.Sign(t, tampered, "2", signed))
	wantRefused(t, "the event changed after signing", err, "does not match")

	// The string to sign ends with a newline: a signature over it without
	// that newline is not SNS's (another project dropped all SES events
	// by building it so).
	_, err = f.v.Verify(ctx, f.Sign(t, bounce(), "2", strings.TrimSuffix(webhooktest.ToSign(bounce()), "\n")))
	wantRefused(t, "signed without the last newline", err, "does not match")

	_, err = f.v.Verify(ctx, f.Sign(t, bounce(), "3"))
	wantRefused(t, "SignatureVersion 3", err, "want 1 or 2")
}

// A message is refused before anything is fetched when its topic is not
// allowed or its certificate URL is not SNS's, in the topic's region.
func TestSNSRefusesForeignTopicsAndCertificates(t *testing.T) {
	f := newSNS(t, now.Add(365*24*time.Hour))
	ctx := context.Background()
	foreign := bounce()
	foreign["TopicArn"] = "arn:aws:sns:us-east-1:999999999999:ses-events"
	_, err := f.v.Verify(ctx, f.Sign(t, foreign, "2"))
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
		if err := json.Unmarshal(f.Sign(t, bounce(), "2"), &m); err != nil {
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
	if n := f.Fetches.Load(); n != 0 {
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
	m, err := f.v.Verify(ctx, f.Sign(t, sub, "2"))
	if err != nil {
		t.Fatal(err)
	}
	<-f.Gets // the certificate
	if err := f.v.Confirm(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := <-f.Gets; !strings.HasPrefix(got, "/?Action=ConfirmSubscription&TopicArn="+topic) {
		t.Errorf("confirmed with GET %s", got)
	}
	m.SubscribeURL = "https://evil.test/?Action=ConfirmSubscription"
	if err := f.v.Confirm(ctx, m); err == nil {
		t.Error("a SubscribeURL on another host was read")
	}
}

func TestSNSExpiredCertificate(t *testing.T) {
	f := newSNS(t, now.Add(-time.Minute))
	_, err := f.v.Verify(context.Background(), f.Sign(t, bounce(), "2"))
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
