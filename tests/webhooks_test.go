package tests

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
	"github.com/nornweave/nornweave/internal/testkit/webhooktest"
)

// signedHook is a webhook request as a provider posts it: the raw body and
// its headers (key, value, ...).
type signedHook struct {
	body    string
	headers []string
}

// hookSigner makes kind's webhook: a hard bounce of gone@customer.test for
// the message the provider calls providerID, under event id id, signed at
// at (valid) or with another key (forged).
type hookSigner func(t *testing.T, id, providerID string, at time.Time, forged bool) signedHook

// TestWebhooksPerProvider: each provider's events, signed by its own
// algorithm with keys made here, through POST /webhooks/{provider} to a
// server that sent the message through that provider's API (a fake that
// answers as the provider documents): a valid event is stored and
// suppresses the address; a forged or stale one is refused with nothing
// stored; the same event again changes nothing (Mailgun: its token is
// refused as a replay).
func TestWebhooksPerProvider(t *testing.T) {
	t.Parallel()
	for _, kind := range providertest.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			f := providertest.Start(t, kind)
			cfg := hostedConfig(t, "sqlite", kind, f)
			var (
				sign hookSigner
				o    apptest.Options
				sns  *webhooktest.SNS
			)
			switch kind {
			case "mailgun":
				cfg.MailgunWebhookSigningKey = "key-mailgun-signing"
				sign = func(t *testing.T, id, pid string, at time.Time, forged bool) signedHook {
					key := cfg.MailgunWebhookSigningKey
					if forged {
						key = "key-other"
					}
					b, _ := json.Marshal(map[string]any{"signature": webhooktest.MailgunSignature(key, at, "tok-"+id+at.String()),
						"event-data": map[string]any{"id": id, "event": "failed", "severity": "permanent",
							"recipient": "gone@customer.test", "timestamp": float64(at.Unix()),
							"message":         map[string]any{"headers": map[string]any{"message-id": strings.Trim(pid, "<>")}},
							"delivery-status": map[string]any{"code": 550, "enhanced-code": "5.1.1", "message": "No such user"}}})
					return signedHook{body: string(b)}
				}
			case "sendgrid":
				key, public := webhooktest.SendGridKey(t)
				other, _ := webhooktest.SendGridKey(t)
				cfg.SendgridWebhookPublicKey = public
				sign = func(t *testing.T, id, pid string, at time.Time, forged bool) signedHook {
					b := fmt.Sprintf(`[{"email":"gone@customer.test","timestamp":%d,"event":"bounce","type":"bounce",`+
						`"sg_event_id":%q,"sg_message_id":"%s.filter0001.16648.5515E0B88.0","status":"5.1.1",`+
						`"reason":"550 5.1.1 The email account that you tried to reach does not exist"}]`+"\r\n", at.Unix(), id, pid)
					k := key
					if forged {
						k = other
					}
					return signedHook{body: b, headers: headerList(webhooktest.SendGridHeaders(t, k, at, []byte(b)))}
				}
			case "resend":
				secret, whsec := webhooktest.ResendSecret()
				other, _ := webhooktest.ResendSecret()
				cfg.ResendWebhookSecret = whsec
				sign = func(t *testing.T, id, pid string, at time.Time, forged bool) signedHook {
					b := fmt.Sprintf(`{"type":"email.bounced","created_at":%q,"data":{"email_id":%q,"to":["gone@customer.test"],`+
						`"bounce":{"type":"Permanent","subType":"General","message":"550 5.1.1 user unknown"}}}`,
						at.UTC().Format(time.RFC3339Nano), pid)
					s := secret
					if forged {
						s = other
					}
					return signedHook{body: b, headers: headerList(webhooktest.ResendHeaders(s, id, at, []byte(b)))}
				}
			case "ses":
				sns = webhooktest.NewSNS(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
				forger := webhooktest.NewSNS(t, time.Now().Add(-time.Hour), time.Now().Add(time.Hour))
				cfg.SESSNSTopicARNs = webhooktest.Topic
				o.CertFetch = sns.Fetch
				sign = func(t *testing.T, id, pid string, at time.Time, forged bool) signedHook {
					msg := fmt.Sprintf(`{"notificationType":"Bounce","bounce":{"bounceType":"Permanent","bounceSubType":"General",`+
						`"bouncedRecipients":[{"emailAddress":"gone@customer.test","status":"5.1.1","diagnosticCode":"smtp; 550 5.1.1 user unknown"}],`+
						`"timestamp":%q},"mail":{"messageId":%q,"timestamp":%q}}`,
						at.UTC().Format(time.RFC3339Nano), pid, at.UTC().Format(time.RFC3339Nano))
					m := map[string]string{"Type": "Notification", "MessageId": id, "TopicArn": webhooktest.Topic,
						"Message": msg, "Timestamp": at.UTC().Format(time.RFC3339Nano)}
					signer := sns
					if forged {
						signer = forger
					}
					// SNS posts text/plain.
					return signedHook{body: string(signer.Sign(t, m, "2")), headers: []string{"Content-Type", "text/plain; charset=UTF-8"}}
				}
			}
			s := &server{Server: apptest.StartWith(t, cfg, o), cfg: cfg}
			inbox := s.createInbox(t, "support")
			sent := s.send(t, inbox, "gone@customer.test")
			mustStatus(t, sent, http.StatusCreated)
			msgID, pid := sent.JSON(t)["id"].(string), f.ID(1)
			path := "/webhooks/" + kind
			post := func(h signedHook) response { return s.do(t, "POST", path, h.body, h.headers...) }
			events := func() int {
				return len(s.do(t, "GET", "/v1/messages/"+msgID+"/events", nil).JSON(t)["items"].([]any))
			}
			now := time.Now()

			for name, h := range map[string]signedHook{
				"forged": sign(t, "ev-1", pid, now, true),
				"stale":  sign(t, "ev-1", pid, now.Add(-10*time.Minute), false),
			} {
				if kind == "ses" && name == "stale" {
					continue // SNS retries for as long as its policy says: no age is imposed
				}
				if r := post(h); r.Status != http.StatusUnauthorized || r.JSON(t)["code"] != "invalid_signature" {
					t.Errorf("%s: %d %s, want 401 invalid_signature", name, r.Status, r.Body)
				}
			}
			if n := events(); n != 0 {
				t.Fatalf("%d events stored from refused webhooks", n)
			}
			valid := sign(t, "ev-1", pid, now, false)
			r := post(valid)
			if r.Status != http.StatusOK || r.JSON(t)["stored"] != 1.0 {
				t.Fatalf("signed bounce = %d %s, want 200 stored 1", r.Status, r.Body)
			}
			r = post(valid)
			switch {
			case kind == "mailgun" && r.Status != http.StatusUnauthorized:
				t.Errorf("Mailgun's token replayed = %d %s, want 401", r.Status, r.Body)
			case kind != "mailgun" && (r.Status != http.StatusOK || r.JSON(t)["seen"] != 1.0):
				t.Errorf("the same event again = %d %s, want 200 seen 1", r.Status, r.Body)
			}
			if n := events(); n != 1 {
				t.Errorf("%d events stored, want 1", n)
			}
			sups := s.listSuppressions(t, "?email=GONE@customer.test")
			if len(sups) != 1 || sups[0]["reason"] != "bounce" || sups[0]["source"] != kind {
				t.Errorf("suppressions = %v, want gone@customer.test by a %s bounce", sups, kind)
			}
			r = s.send(t, inbox, "gone@customer.test")
			if r.Status != http.StatusUnprocessableEntity || f.Count() != 1 {
				t.Errorf("send after the bounce = %d %s, %d at the provider; want 422, 1", r.Status, r.Body, f.Count())
			}
			switch kind {
			case "ses":
				snsRefusals(t, s, sns)
			case "mailgun":
				// A body over 1 MiB is refused before it is verified; a
				// provider we do not know is no route.
				r := s.do(t, "POST", path, strings.Repeat(" ", api.WebhookMaxBody+1))
				if r.Status != http.StatusRequestEntityTooLarge {
					t.Errorf("a body over 1 MiB = %d %s, want 413", r.Status, r.Body)
				}
				mustStatus(t, s.do(t, "POST", "/webhooks/postmark", "{}"), http.StatusNotFound)
			}
		})
	}
}

// snsRefusals: a notification of a topic outside SES_SNS_TOPIC_ARNS, or
// whose certificate URL is not SNS's, is refused before anything is
// fetched; a subscription to the allowed topic is confirmed.
func snsRefusals(t *testing.T, s *server, sns *webhooktest.SNS) {
	fetched := sns.Fetches.Load()
	note := map[string]string{"Type": "Notification", "MessageId": "m-2", "TopicArn": "arn:aws:sns:us-east-1:999999999999:forged",
		"Message": `{"notificationType":"Bounce"}`, "Timestamp": "2026-11-27T00:00:00.000Z"}
	foreignCert := strings.Replace(string(sns.Sign(t, map[string]string{"Type": "Notification", "MessageId": "m-3",
		"TopicArn": webhooktest.Topic, "Message": `{"notificationType":"Bounce"}`, "Timestamp": "2026-11-27T00:00:00.000Z"}, "2")),
		"sns.us-east-1.amazonaws.com", "sns.us-east-1.amazonaws.com.evil.test", 1)
	for name, body := range map[string]string{"foreign topic": string(sns.Sign(t, note, "2")), "foreign certificate host": foreignCert} {
		if r := s.do(t, "POST", "/webhooks/ses", body); r.Status != http.StatusUnauthorized {
			t.Errorf("%s: %d %s, want 401", name, r.Status, r.Body)
		}
	}
	if n := sns.Fetches.Load(); n != fetched {
		t.Errorf("refused notifications fetched %d certificates", n-fetched)
	}
	for len(sns.Gets) > 0 {
		<-sns.Gets
	}
	sub := map[string]string{"Type": "SubscriptionConfirmation", "MessageId": "m-4", "TopicArn": webhooktest.Topic,
		"Token": "2336412f37", "Message": "You have chosen to subscribe to the topic.", "Timestamp": "2026-11-27T00:00:00.000Z",
		"SubscribeURL": webhooktest.Host + "/?Action=ConfirmSubscription&TopicArn=" + webhooktest.Topic + "&Token=2336412f37"}
	mustStatus(t, s.do(t, "POST", "/webhooks/ses", string(sns.Sign(t, sub, "1"))), http.StatusOK)
	var confirmed bool
	for len(sns.Gets) > 0 {
		if strings.HasPrefix(<-sns.Gets, "/?Action=ConfirmSubscription") {
			confirmed = true
		}
	}
	if !confirmed {
		t.Error("the subscription to the allowed topic was not confirmed")
	}
}

// headerList flattens h for server.do.
func headerList(h http.Header) []string {
	var out []string
	for k, vs := range h {
		for _, v := range vs {
			out = append(out, k, v)
		}
	}
	return out
}
