package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/imaptest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/internal/testkit/webhooktest"
	"github.com/nornweave/nornweave/providers/bounce"
)

// mailgunEvent is a Mailgun webhook body (event-data of the documented
// shape) signed with key at at with token (webhooktest.MailgunSignature).
func mailgunEvent(key string, at time.Time, token, id, event, severity, recipient, messageID string) map[string]any {
	return map[string]any{
		"signature": webhooktest.MailgunSignature(key, at, token),
		"event-data": map[string]any{
			"id": id, "event": event, "severity": severity, "recipient": recipient, "timestamp": float64(at.Unix()) + 0.25,
			"reason": "bounce", "message": map[string]any{"headers": map[string]any{"message-id": messageID}},
			"delivery-status": map[string]any{"code": 550, "enhanced-code": "5.1.1",
				"description": "The email account that you tried to reach does not exist."},
		},
	}
}

// TestBounceSuppressesUntilDeleted is issue 29's path from bounce to
// suppression, with the built binary on both databases: a send; Mailgun's
// hard bounce for it; the next send to that address refused with 422
// recipient_suppressed, the throttle's used unchanged and nothing at the
// relay; the suppression deleted; the send goes out. On the way: the
// event once however often it comes, a replayed or badly signed webhook
// refused with nothing stored, a soft bounce that suppresses nothing.
func TestBounceSuppressesUntilDeleted(t *testing.T) {
	t.Parallel()
	const key = "key-0123456789abcdef0123456789abcdef"
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		p := startProc(t, procEnv(t, driver, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10", "MAILGUN_WEBHOOK_SIGNING_KEY="+key))
		inbox := p.createInbox(t, "agent")
		sent := p.send(t, inbox, "Bob@Example.test")
		mustStatus(t, sent, http.StatusCreated)
		msg := sent.JSON(t)
		msgID, providerID := msg["id"].(string), msg["provider_message_id"].(string)
		mx.WaitForCount(t, 1)

		now := time.Now()
		hook := func(body map[string]any) response { return p.do(t, "POST", "/webhooks/mailgun", body) }
		// Not configured: another provider's route.
		r := p.do(t, "POST", "/webhooks/sendgrid", []any{})
		if r.Status != http.StatusNotFound || r.JSON(t)["code"] != "webhook_not_configured" {
			t.Fatalf("sendgrid webhook without its key = %d %s, want 404 webhook_not_configured", r.Status, r.Body)
		}
		// Refused, nothing stored: another key, a stale timestamp.
		for name, body := range map[string]map[string]any{
			"bad signature": mailgunEvent("key-wrong", now, "tok-bad", "ev-1", "failed", "permanent", "bob@example.test", providerID),
			"stale":         mailgunEvent(key, now.Add(-6*time.Minute), "tok-stale", "ev-1", "failed", "permanent", "bob@example.test", providerID),
		} {
			if r := hook(body); r.Status != http.StatusUnauthorized || r.JSON(t)["code"] != "invalid_signature" {
				t.Errorf("%s: %d %s, want 401 invalid_signature", name, r.Status, r.Body)
			}
		}
		if n := len(p.listSuppressions(t, "")); n != 0 {
			t.Fatalf("%d suppressions after refused webhooks, want none", n)
		}
		// A soft bounce is a delay: nothing suppressed.
		r = hook(mailgunEvent(key, now, "tok-soft", "ev-0", "failed", "temporary", "bob@example.test", providerID))
		mustStatus(t, r, http.StatusOK)
		if n := len(p.listSuppressions(t, "")); n != 0 {
			t.Fatalf("a soft bounce suppressed %d addresses, want none", n)
		}
		// The hard bounce, stored once: its token replayed is refused, the
		// same event under a new token is seen before.
		hard := mailgunEvent(key, now, "tok-hard", "ev-1", "failed", "permanent", "bob@example.test", providerID)
		r = hook(hard)
		mustStatus(t, r, http.StatusOK)
		if got := r.JSON(t); got["stored"] != 1.0 {
			t.Fatalf("hard bounce answered %s, want stored 1", r.Body)
		}
		if r := hook(hard); r.Status != http.StatusUnauthorized {
			t.Errorf("replayed token = %d %s, want 401", r.Status, r.Body)
		}
		r = hook(mailgunEvent(key, now, "tok-again", "ev-1", "failed", "permanent", "bob@example.test", providerID))
		if got := r.JSON(t); r.Status != http.StatusOK || got["stored"] != 0.0 || got["seen"] != 1.0 {
			t.Errorf("the event again = %d %s, want 200 seen 1", r.Status, r.Body)
		}
		// About a message we do not know: 200, ignored.
		r = hook(mailgunEvent(key, now, "tok-unknown", "ev-9", "failed", "permanent", "carol@example.test", "<nobody@acme.test>"))
		if got := r.JSON(t); r.Status != http.StatusOK || got["ignored"] != 1.0 {
			t.Errorf("unknown message = %d %s, want 200 ignored 1", r.Status, r.Body)
		}

		evs := p.do(t, "GET", "/v1/messages/"+msgID+"/events", nil)
		mustStatus(t, evs, http.StatusOK)
		items := evs.JSON(t)["items"].([]any)
		if len(items) != 2 {
			t.Fatalf("events = %s, want the delay and the bounce", evs.Body)
		}
		last := items[1].(map[string]any)
		if last["type"] != "bounced" || last["bounce_type"] != "hard" || last["recipient"] != "bob@example.test" ||
			last["provider"] != "mailgun" || last["smtp_status"] != "5.1.1" {
			t.Errorf("bounce event = %v", last)
		}
		got := p.do(t, "GET", "/v1/messages/"+msgID, nil).JSON(t)
		if rs := got["recipients"].([]any); len(rs) != 1 || rs[0].(map[string]any)["state"] != "bounced" {
			t.Errorf("recipients = %v, want bob bounced", got["recipients"])
		}
		sups := p.listSuppressions(t, "?reason=bounce")
		if len(sups) != 1 || sups[0]["email"] != "bob@example.test" || sups[0]["source"] != "mailgun" || sups[0]["message_id"] != msgID {
			t.Fatalf("suppressions = %v, want bob's bounce", sups)
		}

		used := p.rateLimitWindow(t, "per_minute")["used"]
		again := map[string]any{"inbox_id": inbox, "to": []string{"alice@example.test"},
			"cc": []string{"BOB@example.test"}, "subject": "Again", "body": "Hi"}
		r = p.do(t, "POST", "/v1/messages", again, "Idempotency-Key", "again-1")
		body := r.JSON(t)
		if r.Status != http.StatusUnprocessableEntity || body["code"] != "recipient_suppressed" {
			t.Fatalf("send to a suppressed cc = %d %s, want 422 recipient_suppressed", r.Status, r.Body)
		}
		if l := body["suppressed"].([]any); len(l) != 1 || l[0].(map[string]any)["email"] != "bob@example.test" ||
			l[0].(map[string]any)["reason"] != "bounce" || l[0].(map[string]any)["created_at"] == nil {
			t.Errorf("suppressed = %v", body["suppressed"])
		}
		if after := p.rateLimitWindow(t, "per_minute")["used"]; after != used {
			t.Errorf("used %v after the refusal, %v before: a suppressed send took a slot", after, used)
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("relay received %d messages, want the first only", n)
		}

		mustStatus(t, p.do(t, "DELETE", "/v1/suppressions/BOB@Example.test", nil), http.StatusNoContent)
		mustStatus(t, p.do(t, "DELETE", "/v1/suppressions/bob@example.test", nil), http.StatusNotFound)
		// The refusal kept nothing of its Idempotency-Key: the same
		// request goes out now.
		r = p.do(t, "POST", "/v1/messages", again, "Idempotency-Key", "again-1")
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("the refused request again = %d %s (replayed %q), want 201 sent", r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
		}
		mx.WaitForCount(t, 2)
	})
}

// listSuppressions is GET /v1/suppressions with query's items.
func (s *server) listSuppressions(t *testing.T, query string) []map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/suppressions"+query, nil)
	mustStatus(t, r, http.StatusOK)
	body := r.JSON(t)
	var out []map[string]any
	for _, it := range body["items"].([]any) {
		out = append(out, it.(map[string]any))
	}
	if body["count"] != float64(len(out)) || body["total"] == nil {
		t.Errorf("suppressions page = %s", fmt.Sprint(body))
	}
	return out
}

// TestHeldMessageToSuppressedFails: a scheduled message whose recipient is
// suppressed while it waits ends failed with recipient_suppressed at its
// time, sends nothing and takes no slot; a schedule to an address already
// suppressed is refused at once.
func TestHeldMessageToSuppressedFails(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startHeld(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 5 })
		inbox := s.createInbox(t, "held")
		// Scheduled an hour ahead, and moved to its time only once the
		// address is suppressed: at 2 s ahead, a busy machine (CI) took
		// longer than that to suppress it, and the message went out
		// before the suppression existed.
		r := s.sendAt(t, inbox, "bob@example.com", time.Now().Add(time.Hour))
		mustStatus(t, r, http.StatusAccepted)
		id := r.JSON(t)["id"].(string)
		r = s.do(t, "POST", "/v1/suppressions", map[string]any{"email": "Bob@Example.com", "reason": "manual"})
		mustStatus(t, r, http.StatusCreated)
		if again := s.do(t, "POST", "/v1/suppressions", map[string]any{"email": "bob@example.com"}); again.Status != http.StatusOK ||
			again.JSON(t)["created_at"] != r.JSON(t)["created_at"] {
			t.Errorf("suppressing again = %d %s, want 200 with the first entry", again.Status, again.Body)
		}
		r = s.sendAt(t, inbox, "bob@example.com", time.Now().Add(time.Hour))
		if r.Status != http.StatusUnprocessableEntity || r.JSON(t)["code"] != "recipient_suppressed" {
			t.Errorf("scheduling to a suppressed address = %d %s, want 422 recipient_suppressed", r.Status, r.Body)
		}
		moveTo(t, s, id, time.Now().Add(time.Second))
		waitFor(t, 30*time.Second, func() bool { return s.status(t, id) != "scheduled" })
		m := s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)
		if m["status"] != "failed" || !strings.HasPrefix(fmt.Sprint(m["error"]), "recipient_suppressed: ") {
			t.Errorf("held message = %v %v, want failed with recipient_suppressed", m["status"], m["error"])
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != 0.0 || w["in_flight"] != 0.0 {
			t.Errorf("per-minute window %v: the suppressed message took a slot", w)
		}
		if n := s.SMTP.Count(); n != 0 {
			t.Errorf("relay received %d messages, want none", n)
		}
	})
}

// TestSMTPBounceSuppresses: with BOUNCE_ADDRESS and BOUNCE_IMAP_URL, with
// the built binary on both databases, mail through SMTP goes out from a
// VERP address; a delivery-status report sent back to it, placed in the
// bounce mailbox (go-imap's in-memory server), suppresses the address and
// is moved out of the way; an auto-reply to another message's VERP
// address suppresses nothing and stays where it is.
func TestSMTPBounceSuppresses(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		imapAddr := imaptest.Start(t, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}}, nil, false)
		box := imaptest.Open(t, imapAddr)
		mx := smtptest.Start(t)
		p := startProc(t, procEnv(t, driver, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10", "BOUNCE_ADDRESS=bounces@acme.test",
			"BOUNCE_IMAP_URL=imap://"+imaptest.User+":"+imaptest.Password+"@"+imapAddr+"/INBOX?starttls=false",
			"BOUNCE_POLL_INTERVAL=1s"))
		inbox := p.createInbox(t, "agent")
		mustStatus(t, p.send(t, inbox, "bob@example.test"), http.StatusCreated)
		mustStatus(t, p.send(t, inbox, "carol@example.test"), http.StatusCreated)
		// One message to two: one return path for both, whose bounces
		// count for its recipients only.
		mustStatus(t, p.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox,
			"to": []string{"dave@example.test", "erin@example.test"}, "subject": "Both", "body": "Hi"}), http.StatusCreated)
		mx.WaitForCount(t, 3)
		verp := map[string]string{}
		for _, m := range mx.Messages() {
			if !strings.HasPrefix(m.From, "bounces+") || !strings.HasSuffix(m.From, "@acme.test") {
				t.Fatalf("envelope from %q to %v, want a VERP address of bounces@acme.test", m.From, m.To)
			}
			verp[strings.Join(m.To, ",")] = m.From
		}
		if len(verp) != 3 || verp["bob@example.test"] == verp["carol@example.test"] {
			t.Fatalf("return paths %v, want one per message", verp)
		}
		box.Add(dsnTo(verp["bob@example.test"], "dsn-bob", "bob@example.test"))
		box.Add(dsnTo(verp["dave@example.test,erin@example.test"], "dsn-erin", "erin@example.test"))
		box.Add(dsnTo(verp["dave@example.test,erin@example.test"], "dsn-mallory", "mallory@example.test"))
		box.Add([]byte("From: Carol <carol@example.test>\nTo: " + verp["carol@example.test"] +
			"\nSubject: Auto: Hello\nMessage-ID: <vacation-carol@example.test>\nDate: Fri, 27 Nov 2026 00:00:00 +0000\n" +
			"Auto-Submitted: auto-replied (vacation)\n\nI am away until Monday.\n"))

		waitFor(t, 60*time.Second, func() bool { return len(p.listSuppressions(t, "")) >= 2 })
		waitFor(t, 30*time.Second, func() bool { _, ok := box.Messages("INBOX")["dsn-mallory@mx.example.test"]; return !ok })
		got := map[string]bool{}
		for _, sp := range p.listSuppressions(t, "") {
			if sp["reason"] != "bounce" || sp["source"] != "smtp" {
				t.Errorf("suppression %v, want a bounce from the bounce mailbox", sp)
			}
			got[sp["email"].(string)] = true
		}
		if len(got) != 2 || !got["bob@example.test"] || !got["erin@example.test"] {
			t.Fatalf("suppressed %v, want bob and erin (mallory was no recipient of that message)", got)
		}
		waitFor(t, 30*time.Second, func() bool { _, ok := box.Messages("INBOX")["dsn-bob@mx.example.test"]; return !ok })
		if _, ok := box.Messages("INBOX")["vacation-carol@example.test"]; !ok {
			t.Error("the auto-reply was moved or deleted")
		}
		if _, ok := box.Messages(bounce.DefaultProcessed)["dsn-bob@mx.example.test"]; !ok {
			t.Error("the DSN is not in the processed mailbox")
		}

		used := p.rateLimitWindow(t, "per_minute")["used"]
		if r := p.send(t, inbox, "bob@example.test"); r.Status != http.StatusUnprocessableEntity || r.JSON(t)["code"] != "recipient_suppressed" {
			t.Errorf("send to bob after his bounce = %d %s, want 422 recipient_suppressed", r.Status, r.Body)
		}
		mustStatus(t, p.send(t, inbox, "carol@example.test"), http.StatusCreated)
		mx.WaitForCount(t, 4)
		if after := p.rateLimitWindow(t, "per_minute")["used"]; after != used.(float64)+1 {
			t.Errorf("used %v after one refusal and one send, %v before", after, used)
		}
	})
}

// dsnTo is a delivery-status report, as Postfix writes one, sent back to
// returnPath: recipient failed with 5.1.1.
func dsnTo(returnPath, id, recipient string) []byte {
	return []byte("From: Mail Delivery System <MAILER-DAEMON@mx.example.test>\nTo: " + returnPath +
		"\nSubject: Undelivered Mail Returned to Sender\nMessage-ID: <" + id + "@mx.example.test>\n" +
		"Date: Fri, 27 Nov 2026 00:00:00 +0000\nAuto-Submitted: auto-replied\nMIME-Version: 1.0\n" +
		"Content-Type: multipart/report; report-type=delivery-status; boundary=\"b\"\n\n" +
		"--b\nContent-Type: text/plain\n\nI'm sorry to have to inform you that your message could not be delivered.\n\n" +
		"--b\nContent-Type: message/delivery-status\n\nReporting-MTA: dns; mx.example.test\n\n" +
		"Final-Recipient: rfc822; " + recipient + "\nAction: failed\nStatus: 5.1.1\n" +
		"Diagnostic-Code: smtp; 550 5.1.1 <" + recipient + ">: Recipient address rejected: User unknown\n\n--b--\n")
}
