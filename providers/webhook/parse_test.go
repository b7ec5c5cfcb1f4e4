package webhook_test

import (
	"strings"
	"testing"
	"time"

	wh "github.com/nornweave/nornweave/providers/webhook"
)

// Payloads in the shapes each provider documents for its delivery events.

const resendBounced = `{
  "type": "email.bounced",
  "created_at": "2026-11-26T11:30:10.000Z",
  "data": {
    "email_id": "4ef9a417-02e9-4d39-ad75-9611e0fcc33c",
    "created_at": "2026-11-26T11:30:08.000Z",
    "from": "Acme <support@acme.test>",
    "to": ["gone@example.com", "also-gone@example.com"],
    "subject": "Your order",
    "bounce": {"message": "The recipient's email address does not exist.", "subType": "NoAccount", "type": "Permanent"}
  }
}`

const sendgridBatch = `[
  {"email": "gone@example.com", "timestamp": 1764156610, "event": "bounce", "type": "bounce",
   "sg_event_id": "ZXZlbnQtMQ", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.filterdrecv-5bd9b6c4b-8cq4n-1-5F5A6A0D-1B.0",
   "status": "5.1.1", "reason": "550 5.1.1 The email account that you tried to reach does not exist.", "smtp-id": "<x@acme.test>"},
  {"email": "full@example.com", "timestamp": 1764156611, "event": "bounce", "type": "blocked",
   "sg_event_id": "ZXZlbnQtMg", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.filterdrecv-5bd9b6c4b-8cq4n-1-5F5A6A0D-1B.1",
   "status": "4.2.2", "reason": "452 4.2.2 Mailbox full"},
  {"email": "ok@example.com", "timestamp": 1764156612, "event": "processed",
   "sg_event_id": "ZXZlbnQtMw", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.x.2"},
  {"email": "ok@example.com", "timestamp": 1764156613, "event": "delivered", "response": "250 2.0.0 OK",
   "sg_event_id": "ZXZlbnQtNA", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.x.2"},
  {"email": "angry@example.com", "timestamp": 1764156614, "event": "spamreport",
   "sg_event_id": "ZXZlbnQtNQ", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.x.3"},
  {"email": "old@example.com", "timestamp": 1764156615, "event": "dropped", "reason": "Bounced Address",
   "sg_event_id": "ZXZlbnQtNg", "sg_message_id": "W1cmbmlPRKOsyJ2VYYUqnw.x.4"}
]`

const mailgunFailed = `{
  "signature": {"timestamp": "1764156610", "token": "t", "signature": "s"},
  "event-data": {
    "id": "G9Bn5sl1TC6nu79C8C0bwg", "timestamp": 1764156610.253, "event": "failed", "severity": "permanent",
    "reason": "bounce", "recipient": "gone@example.com",
    "message": {"headers": {"message-id": "20261126113010.1.ABCDEF@mg.acme.test", "to": "gone@example.com"}},
    "delivery-status": {"code": 550, "enhanced-code": "5.1.1", "attempt-no": 1,
      "message": "5.1.1 The email account that you tried to reach does not exist.",
      "description": "The email account that you tried to reach does not exist."}
  }
}`

const sesBounce = `{"notificationType":"Bounce","bounce":{"feedbackId":"0100018c-fb","bounceType":"Permanent",
"bounceSubType":"General","bouncedRecipients":[{"emailAddress":"gone@example.com","action":"failed","status":"5.1.1",
"diagnosticCode":"smtp; 550 5.1.1 user unknown"}],"timestamp":"2026-11-26T11:30:10.123Z","reportingMTA":"dsn; a8-1.smtp-out.amazonses.com"},
"mail":{"timestamp":"2026-11-26T11:30:08.000Z","source":"support@acme.test","messageId":"0100018c-abc-000000",
"destination":["gone@example.com"]}}`

func TestParseResend(t *testing.T) {
	got, err := wh.ParseResend("msg_2b", []byte(resendBounced))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 26, 11, 30, 10, 0, time.UTC)
	want := []wh.Event{
		{ID: "msg_2b/gone@example.com", Type: wh.Bounced, BounceType: wh.Hard, Recipient: "gone@example.com",
			ProviderMessageID: "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", OccurredAt: at,
			Diagnostic: "The recipient's email address does not exist."},
		{ID: "msg_2b/also-gone@example.com", Type: wh.Bounced, BounceType: wh.Hard, Recipient: "also-gone@example.com",
			ProviderMessageID: "4ef9a417-02e9-4d39-ad75-9611e0fcc33c", OccurredAt: at,
			Diagnostic: "The recipient's email address does not exist."},
	}
	sameEvents(t, got, want)

	transient := strings.Replace(resendBounced, `"Permanent"`, `"Transient"`, 1)
	if got, _ := wh.ParseResend("m", []byte(transient)); len(got) != 2 || got[0].BounceType != wh.Soft {
		t.Errorf("a Transient bounce: %+v, want soft", got)
	}
	for typ, want := range map[string]string{"email.delivered": wh.Delivered, "email.complained": wh.Complained,
		"email.delivery_delayed": wh.Delayed, "email.failed": wh.Failed, "email.opened": wh.Opened,
		"email.clicked": wh.Clicked, "email.suppressed": wh.Suppressed, "email.sent": "", "email.scheduled": ""} {
		got, err := wh.ParseResend("m", []byte(strings.Replace(resendBounced, "email.bounced", typ, 1)))
		if err != nil || (want == "") != (len(got) == 0) || (want != "" && got[0].Type != want) {
			t.Errorf("%s: %+v, %v; want %q", typ, got, err, want)
		}
	}
}

func TestParseSendGrid(t *testing.T) {
	got, err := wh.ParseSendGrid([]byte(sendgridBatch))
	if err != nil {
		t.Fatal(err)
	}
	id := "W1cmbmlPRKOsyJ2VYYUqnw"
	want := []wh.Event{
		{ID: "ZXZlbnQtMQ", Type: wh.Bounced, BounceType: wh.Hard, Recipient: "gone@example.com", ProviderMessageID: id,
			OccurredAt: time.Unix(1764156610, 0).UTC(), SMTPStatus: "5.1.1",
			Diagnostic: "550 5.1.1 The email account that you tried to reach does not exist."},
		{ID: "ZXZlbnQtMg", Type: wh.Bounced, BounceType: wh.Soft, Recipient: "full@example.com", ProviderMessageID: id,
			OccurredAt: time.Unix(1764156611, 0).UTC(), SMTPStatus: "4.2.2", Diagnostic: "452 4.2.2 Mailbox full"},
		{ID: "ZXZlbnQtNA", Type: wh.Delivered, Recipient: "ok@example.com", ProviderMessageID: id,
			OccurredAt: time.Unix(1764156613, 0).UTC(), Diagnostic: "250 2.0.0 OK"},
		{ID: "ZXZlbnQtNQ", Type: wh.Complained, Recipient: "angry@example.com", ProviderMessageID: id,
			OccurredAt: time.Unix(1764156614, 0).UTC()},
		{ID: "ZXZlbnQtNg", Type: wh.Suppressed, Recipient: "old@example.com", ProviderMessageID: id,
			OccurredAt: time.Unix(1764156615, 0).UTC(), Diagnostic: "Bounced Address"},
	}
	sameEvents(t, got, want)
	if _, err := wh.ParseSendGrid([]byte(`{"event": "bounce"}`)); err == nil {
		t.Error("an object, not an array, was read")
	}
}

func TestParseMailgun(t *testing.T) {
	got, err := wh.ParseMailgun([]byte(mailgunFailed))
	if err != nil {
		t.Fatal(err)
	}
	want := []wh.Event{{ID: "G9Bn5sl1TC6nu79C8C0bwg", Type: wh.Bounced, BounceType: wh.Hard,
		Recipient: "gone@example.com", ProviderMessageID: "<20261126113010.1.ABCDEF@mg.acme.test>",
		OccurredAt: time.Unix(1764156610, 253e6).UTC(), SMTPStatus: "5.1.1",
		Diagnostic: "The email account that you tried to reach does not exist."}}
	sameEvents(t, got, want)

	temporary := strings.Replace(mailgunFailed, `"permanent"`, `"temporary"`, 1)
	if got, _ := wh.ParseMailgun([]byte(temporary)); len(got) != 1 || got[0].Type != wh.Delayed {
		t.Errorf("a temporary failure: %+v, want delayed (Mailgun tries again)", got)
	}
	suppressed := strings.Replace(mailgunFailed, `"reason": "bounce"`, `"reason": "suppress-bounce"`, 1)
	if got, _ := wh.ParseMailgun([]byte(suppressed)); len(got) != 1 || got[0].Type != wh.Suppressed {
		t.Errorf("a failure by Mailgun's own list: %+v, want suppressed", got)
	}
	accepted := strings.Replace(mailgunFailed, `"event": "failed"`, `"event": "accepted"`, 1)
	if got, err := wh.ParseMailgun([]byte(accepted)); err != nil || len(got) != 0 {
		t.Errorf("accepted: %+v, %v; want no event", got, err)
	}
}

func TestParseSES(t *testing.T) {
	got, err := wh.ParseSES("22b80b92", sesBounce)
	if err != nil {
		t.Fatal(err)
	}
	want := []wh.Event{{ID: "22b80b92/gone@example.com", Type: wh.Bounced, BounceType: wh.Hard,
		Recipient: "gone@example.com", ProviderMessageID: "0100018c-abc-000000",
		OccurredAt: time.Date(2026, 11, 26, 11, 30, 10, 123e6, time.UTC), SMTPStatus: "5.1.1",
		Diagnostic: "smtp; 550 5.1.1 user unknown"}}
	sameEvents(t, got, want)

	for name, c := range map[string]struct {
		message, typ, bounce string
	}{
		"transient":        {strings.Replace(sesBounce, `"Permanent"`, `"Transient"`, 1), wh.Bounced, wh.Soft},
		"on SES's list":    {strings.Replace(sesBounce, `"General"`, `"OnAccountSuppressionList"`, 1), wh.Suppressed, ""},
		"event publishing": {strings.Replace(sesBounce, `"notificationType"`, `"eventType"`, 1), wh.Bounced, wh.Hard},
		"complaint": {`{"notificationType":"Complaint","complaint":{"complainedRecipients":[{"emailAddress":"angry@example.com"}],
			"timestamp":"2026-11-26T11:31:00Z"},"mail":{"messageId":"0100018c-abc-000000","destination":["angry@example.com"]}}`,
			wh.Complained, ""},
		"delivery": {`{"notificationType":"Delivery","delivery":{"recipients":["ok@example.com"],"timestamp":"2026-11-26T11:31:00Z",
			"smtpResponse":"250 ok"},"mail":{"messageId":"0100018c-abc-000000"}}`, wh.Delivered, ""},
	} {
		got, err := wh.ParseSES("n", c.message)
		if err != nil || len(got) != 1 || got[0].Type != c.typ || got[0].BounceType != c.bounce {
			t.Errorf("%s: %+v, %v; want %s %s", name, got, err, c.typ, c.bounce)
		}
	}
	if got, err := wh.ParseSES("n", `{"eventType":"Send","mail":{"messageId":"x"}}`); err != nil || len(got) != 0 {
		t.Errorf("Send: %+v, %v; want no event", got, err)
	}
}

// A diagnostic is kept up to 1,000 bytes, cut on a rune boundary.
func TestDiagnosticBounded(t *testing.T) {
	long := strings.Replace(sesBounce, "smtp; 550 5.1.1 user unknown", strings.Repeat("é", 2000), 1)
	got, err := wh.ParseSES("n", long)
	if err != nil || len(got) != 1 {
		t.Fatal(got, err)
	}
	if d := got[0].Diagnostic; len(d) != 1000 || !strings.HasPrefix(d, "éé") {
		t.Errorf("diagnostic of %d bytes kept, want 1000", len(d))
	}
}

func sameEvents(t *testing.T, got, want []wh.Event) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d events %+v, want %d", len(got), got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
}
