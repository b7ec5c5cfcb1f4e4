package tests

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
)

// hostedConfig points the server at a fake of provider kind.
func hostedConfig(t *testing.T, driver, kind string, f *providertest.Fake) config.Config {
	cfg := apptest.Config(t, driver)
	cfg.EmailProvider = kind
	switch kind {
	case "mailgun":
		cfg.MailgunAPIKey, cfg.MailgunDomain, cfg.MailgunAPIBase = "mg-key", "mg.acme.test", f.URL
	case "sendgrid":
		cfg.SendgridAPIKey, cfg.SendgridAPIBase = "sg-key", f.URL
	case "resend":
		cfg.ResendAPIKey, cfg.ResendAPIBase = "re-key", f.URL
	case "ses":
		cfg.AWSAccessKeyID, cfg.AWSSecretAccessKey, cfg.SESEndpoint = "AKIDTEST", "aws-secret", f.URL
	}
	return cfg
}

func TestHostedProvidersEndToEnd(t *testing.T) {
	t.Parallel()
	for _, kind := range providertest.Kinds {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			forEachDriver(t, func(t *testing.T, driver string) {
				f := providertest.Start(t, kind)
				cfg := hostedConfig(t, driver, kind, f)
				cfg.SendRateLimitPerMinute = 3
				s := &server{Server: apptest.Start(t, cfg), cfg: cfg}
				inbox := s.createInbox(t, "support")

				// 1. A new message: the provider's id is recorded.
				r := s.do(t, "POST", "/v1/messages", map[string]any{
					"inbox_id": inbox, "to": []string{"Ann <ann@customer.test>"}, "cc": []string{"cc@customer.test"},
					"bcc": []string{"audit@acme.test"}, "subject": "Your order", "body": "Hello **Ann**",
				})
				mustStatus(t, r, http.StatusCreated)
				sent := r.JSON(t)
				if sent["status"] != "sent" || sent["provider_message_id"] != f.ID(1) || sent["error"] != nil {
					t.Fatalf("send = %v, want sent with provider id %q", sent, f.ID(1))
				}
				id := sent["id"].(string)
				r = s.do(t, "GET", "/v1/messages/"+id, nil)
				mustStatus(t, r, http.StatusOK)
				row := r.JSON(t)
				ours := "<" + id + "@acme.test>"
				if row["status"] != "sent" || row["provider_message_id"] != f.ID(1) || row["message_id_header"] != ours {
					t.Errorf("stored row = %v, want sent, %q, our Message-ID %q", row, f.ID(1), ours)
				}
				first := f.Message(t, 0)
				if got := first.Headers["Message-Id"]; got != ours {
					t.Errorf("Message-ID at the provider = %q, want ours %q", got, ours)
				}
				if first.MIME != nil && !slices.Contains(first.Envelope, "audit@acme.test") {
					t.Errorf("envelope %v lacks the Bcc recipient", first.Envelope)
				}

				// 2. A reply carries the threading headers to the provider.
				r = s.do(t, "POST", "/v1/messages", map[string]any{
					"inbox_id": inbox, "to": []string{"ann@customer.test"}, "subject": "Re: Your order",
					"body": "One more thing.", "reply_to_thread_id": sent["thread_id"],
				})
				mustStatus(t, r, http.StatusCreated)
				if st := r.JSON(t)["status"]; st != "sent" {
					t.Fatalf("reply status = %v", st)
				}
				reply := f.Message(t, 1)
				if reply.Headers["In-Reply-To"] != ours || reply.Headers["References"] != ours {
					t.Errorf("reply In-Reply-To %q References %q, want %q", reply.Headers["In-Reply-To"],
						reply.Headers["References"], ours)
				}

				// 3. A permanent refusal: failed, a useful error, the slot back.
				f.Respond(f.Reject(400, "The from address does not match a verified Sender Identity"))
				r = s.send(t, inbox, "bob@customer.test")
				mustStatus(t, r, http.StatusCreated)
				failed := r.JSON(t)
				e, _ := failed["error"].(string)
				if failed["status"] != "failed" || failed["provider_message_id"] != nil ||
					!strings.Contains(e, kind+": rejected (400)") || !strings.Contains(e, "verified Sender Identity") {
					t.Fatalf("send = %v, want failed with the provider's reason", failed)
				}
				for _, secret := range []string{"mg-key", "sg-key", "re-key", "aws-secret", f.URL} {
					if strings.Contains(e, secret) {
						t.Errorf("error %q leaks %q", e, secret)
					}
				}
				r = s.do(t, "GET", "/v1/messages/"+failed["id"].(string), nil)
				mustStatus(t, r, http.StatusOK)
				if row := r.JSON(t); row["status"] != "failed" || row["error"] != e {
					t.Errorf("recorded row = %v, want failed with its error", row)
				}
				// Two sends of three used: the failure gave its slot back, so
				// one more goes out, and the next is throttled.
				f.Respond(nil)
				r = s.send(t, inbox, "bob@customer.test")
				mustStatus(t, r, http.StatusCreated)
				if st := r.JSON(t)["status"]; st != "sent" {
					t.Fatalf("send after the refusal = %v, want sent", st)
				}
				mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
				if n := f.Count(); n != 4 {
					t.Errorf("fake received %d requests, want 4", n)
				}
			})
		})
	}
}
