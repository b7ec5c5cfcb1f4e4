package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/hookrecv"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/providers/notify"
)

// hookTimeout bounds a wait for a webhook: the relay's poll, River's
// fetch, a retry's wait, on a loaded machine.
const hookTimeout = 30 * time.Second

// webhookConfig opens webhooks out to the loopback receiver, with a
// retry schedule of 300 ms steps (STYLE 25: the schedule is a parameter).
func webhookConfig(cfg *config.Config) {
	cfg.WebhookAllowHTTP, cfg.WebhookAllowPrivateTargets = true, true
	cfg.WebhookRetrySchedule = "300ms,300ms,300ms"
	cfg.HeldPollInterval = 50 * time.Millisecond
}

// createHook registers url for events and returns its id and secret.
func (s *server) createHook(t testing.TB, url string, events ...string) (id, secret string) {
	t.Helper()
	r := s.do(t, "POST", "/v1/webhooks", map[string]any{"url": url, "events": events, "description": "test"})
	mustStatus(t, r, http.StatusCreated)
	out := r.JSON(t)
	id, secret = out["id"].(string), out["secret"].(string)
	if !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("secret %q, want whsec_…", secret)
	}
	return id, secret
}

// deliveries is an endpoint's delivery log for one event.
func (s *server) deliveries(t testing.TB, hookID, eventID string) []map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/webhooks/"+hookID+"/deliveries?limit=100&event_id="+eventID, nil)
	mustStatus(t, r, http.StatusOK)
	var out struct {
		Items []map[string]any `json:"items"`
	}
	if err := json.Unmarshal(r.Body, &out); err != nil {
		t.Fatal(err)
	}
	return out.Items
}

// waitDeliveries waits until the log of an event has n attempts: the
// server writes one after its answer, which the receiver records first.
func (s *server) waitDeliveries(t testing.TB, hookID, eventID string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(hookTimeout)
	for {
		log := s.deliveries(t, hookID, eventID)
		if len(log) >= n {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("delivery log of %s has %d attempts after %s, want %d", eventID, len(log), hookTimeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sendMessage sends one message and returns its id.
func (s *server) sendMessage(t testing.TB, inbox, to string, headers ...string) response {
	t.Helper()
	return s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{to},
		"subject": "Hello", "body": "Hi **there**"}, headers...)
}

func statuses(items []map[string]any) []int {
	var out []int
	for _, d := range items {
		if c, ok := d["status_code"].(float64); ok {
			out = append(out, int(c))
		} else {
			out = append(out, 0)
		}
	}
	return out
}

// TestWebhooksOut is issue 30's delivery, on both databases: a signed
// message.sent the spec's library verifies (and a tampered body it
// refuses); 500, 500, 200 delivered once with three attempts in the log;
// 429 Retry-After: 2 retried after 2 s and not before; a rotation's
// overlap signs with both secrets; a replay carries the same webhook-id;
// a 410 disables the endpoint.
func TestWebhooksOut(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, webhookConfig)
		rcv := hookrecv.Start(t)
		hookID, secret := s.createHook(t, rcv.URL+"/hook", "message.sent")
		if r := s.do(t, "GET", "/v1/webhooks/"+hookID, nil); strings.Contains(string(r.Body), "whsec_") {
			t.Fatalf("GET shows the secret: %s", r.Body)
		}
		inbox := s.createInbox(t, "hooks")
		send := func() string {
			r := s.sendMessage(t, inbox, "ann@example.com")
			mustStatus(t, r, http.StatusCreated)
			return r.JSON(t)["id"].(string)
		}
		delivered := func(id string, n int) []hookrecv.Request {
			t.Helper()
			return rcv.Wait(t, hookTimeout, "message.sent of "+id, func(rs []hookrecv.Request) bool {
				got := hookrecv.Of(rs, "message.sent", id)
				return len(got) >= n && got[n-1].Status == http.StatusOK
			})
		}

		t.Run("signed", func(t *testing.T) {
			id := send()
			q := hookrecv.Of(delivered(id, 1), "message.sent", id)[0]
			if err := hookrecv.Verify(secret, q); err != nil {
				t.Fatalf("the spec's library refuses the delivery: %v; headers %v", err, q.Header)
			}
			tampered := q
			tampered.Body = []byte(strings.Replace(string(q.Body), `"sent"`, `"failed"`, 1))
			if err := hookrecv.Verify(secret, tampered); err == nil {
				t.Fatal("the spec's library verifies a tampered body")
			}
			var ev struct {
				Type      string         `json:"type"`
				Timestamp time.Time      `json:"timestamp"`
				Data      map[string]any `json:"data"`
			}
			if err := json.Unmarshal(q.Body, &ev); err != nil {
				t.Fatal(err)
			}
			if ev.Type != "message.sent" || ev.Data["id"] != id || ev.Data["status"] != "sent" || ev.Timestamp.IsZero() {
				t.Fatalf("event %s, want message.sent of %s, status sent, a timestamp", q.Body, id)
			}
			for _, body := range []string{"text", "html", "content_clean"} {
				if _, ok := ev.Data[body]; ok {
					t.Errorf("data carries the body %q", body)
				}
			}
		})

		t.Run("500 500 200", func(t *testing.T) {
			rcv.Then(hookrecv.Answer{Status: 500}, hookrecv.Answer{Status: 500})
			id := send()
			got := hookrecv.Of(delivered(id, 3), "message.sent", id)
			time.Sleep(time.Second) // a fourth attempt would come 300 ms after the third
			got = hookrecv.Of(rcv.Requests(), "message.sent", id)
			if len(got) != 3 || got[0].ID() != got[2].ID() {
				t.Fatalf("%d requests, want 3 of one webhook-id", len(got))
			}
			log := s.waitDeliveries(t, hookID, got[0].ID(), 3)
			if st := statuses(log); len(st) != 3 || st[0] != 500 || st[1] != 500 || st[2] != 200 {
				t.Fatalf("delivery log statuses %v, want [500 500 200]", st)
			}
			if log[0]["next_retry_at"] == nil || log[2]["next_retry_at"] != nil {
				t.Errorf("next_retry_at %v, %v: want a time after a failure, none after the success",
					log[0]["next_retry_at"], log[2]["next_retry_at"])
			}
			if log[0]["response_body"] != "answered Internal Server Error" {
				t.Errorf("response_body %v, want the receiver's answer", log[0]["response_body"])
			}
		})

		t.Run("NUL in the answer", func(t *testing.T) {
			// PostgreSQL's text refuses NUL: an answer kept as it came would
			// fail the attempt's record, and the event would go again.
			rcv.Then(hookrecv.Answer{Status: 200, Body: "ok\x00\xff"})
			id := send()
			q := hookrecv.Of(delivered(id, 1), "message.sent", id)[0]
			log := s.waitDeliveries(t, hookID, q.ID(), 1)
			time.Sleep(time.Second)
			if n := len(hookrecv.Of(rcv.Requests(), "message.sent", id)); n != 1 || len(s.deliveries(t, hookID, q.ID())) != 1 {
				t.Fatalf("%d requests, want the event delivered once", n)
			}
			if body := log[0]["response_body"]; body != "ok\ufffd\ufffd" {
				t.Errorf("response_body %q, want the answer with U+FFFD for NUL and the invalid byte", body)
			}
		})

		t.Run("429 Retry-After 2", func(t *testing.T) {
			rcv.Then(hookrecv.Answer{Status: 429, Header: http.Header{"Retry-After": {"2"}}})
			id := send()
			got := hookrecv.Of(delivered(id, 2), "message.sent", id)
			if wait := got[1].At.Sub(got[0].At); wait < 2*time.Second {
				t.Fatalf("retried %v after the 429, want at least its Retry-After, 2 s", wait)
			}
		})

		t.Run("rotation", func(t *testing.T) {
			r := s.do(t, "POST", "/v1/webhooks/"+hookID+"/rotate-secret", nil)
			mustStatus(t, r, http.StatusOK)
			newSecret := r.JSON(t)["secret"].(string)
			if newSecret == secret || !strings.HasPrefix(newSecret, "whsec_") {
				t.Fatalf("rotated secret %q", newSecret)
			}
			id := send()
			q := hookrecv.Of(delivered(id, 1), "message.sent", id)[0]
			if sigs := strings.Fields(q.Header.Get("webhook-signature")); len(sigs) != 2 {
				t.Fatalf("webhook-signature %q during the overlap, want two signatures", q.Header.Get("webhook-signature"))
			}
			for name, sec := range map[string]string{"old": secret, "new": newSecret} {
				if err := hookrecv.Verify(sec, q); err != nil {
					t.Errorf("the %s secret does not verify during the overlap: %v", name, err)
				}
			}
		})

		t.Run("replay", func(t *testing.T) {
			id := send()
			first := hookrecv.Of(delivered(id, 1), "message.sent", id)[0]
			log := s.waitDeliveries(t, hookID, first.ID(), 1)
			r := s.do(t, "POST", "/v1/webhooks/"+hookID+"/deliveries/"+log[0]["id"].(string)+"/replay", nil)
			mustStatus(t, r, http.StatusAccepted)
			again := hookrecv.Of(delivered(id, 2), "message.sent", id)[1]
			if again.ID() != first.ID() || string(again.Body) != string(first.Body) {
				t.Fatalf("replay webhook-id %q body %s, want %q and the same body", again.ID(), again.Body, first.ID())
			}
		})

		t.Run("410 disables", func(t *testing.T) {
			rcv.Then(hookrecv.Answer{Status: http.StatusGone})
			id := send()
			rcv.Wait(t, hookTimeout, "the 410", func(rs []hookrecv.Request) bool {
				return len(hookrecv.Of(rs, "message.sent", id)) == 1
			})
			var ep map[string]any
			deadline := time.Now().Add(hookTimeout)
			for {
				ep = s.do(t, "GET", "/v1/webhooks/"+hookID, nil).JSON(t)
				if ep["enabled"] == false || time.Now().After(deadline) {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if ep["enabled"] != false || !strings.HasPrefix(ep["disabled_reason"].(string), "gone") {
				t.Fatalf("after a 410 the endpoint is %v", ep)
			}
			before := len(rcv.Requests())
			next := send()
			time.Sleep(time.Second)
			if n := len(hookrecv.Of(rcv.Requests(), "message.sent", next)); n != 0 || len(rcv.Requests()) != before {
				t.Fatalf("a disabled endpoint got %d more requests", len(rcv.Requests())-before)
			}
			metrics := string(s.do(t, "GET", "/metrics", nil).Body)
			for _, want := range []string{`nornweave_webhook_attempts_total{outcome="delivered"}`,
				`nornweave_webhook_attempts_total{outcome="failed"} 2`, `nornweave_webhook_attempts_total{outcome="snoozed"} 1`,
				`nornweave_webhook_attempts_total{outcome="gone"} 1`, "nornweave_webhook_endpoints_disabled 1",
				"nornweave_webhook_oldest_undelivered_seconds 0"} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
		})
	})
}

// resolverMap resolves names from a map; others do not resolve.
type resolverMap map[string][]netip.Addr

func (m resolverMap) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := m[host]; ok {
		return a, nil
	}
	return nil, &net404{host}
}

type net404 struct{ host string }

func (e *net404) Error() string { return "no such host " + e.host }

// TestWebhookTargetsGuarded is issue 30's SSRF list with the guard on
// (the defaults): every URL into the operator's network is refused with
// 422 when registered, and nothing is ever dialled, counted by the
// client's dial hook. A name that resolved to a public address when it
// was registered and to loopback when it is dialled (DNS rebinding) is
// refused at connect time: the endpoint is disabled, still undialled.
func TestWebhookTargetsGuarded(t *testing.T) {
	t.Parallel()
	var dials atomic.Int64
	mx := smtptest.Start(t)
	cfg := baseConfig(t, "sqlite", mx)
	cfg.HeldPollInterval = 50 * time.Millisecond
	s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{
		WebhookClient: &notify.Options{Dialed: func(string) { dials.Add(1) }},
		WebhookResolver: resolverMap{
			"loopback.test": {netip.MustParseAddr("127.0.0.1")},
			"private.test":  {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")},
			"localhost":     {netip.MustParseAddr("93.184.216.34")}, // rebinding: the dial resolves it again
		},
	}), SMTP: mx, cfg: cfg}
	for _, url := range []string{
		"http://127.0.0.1/hook", "http://[::1]/hook", "https://127.0.0.1/hook", "https://[::1]/hook",
		"https://10.0.0.1/hook", "https://169.254.169.254/latest/meta-data", "https://loopback.test/hook",
		"https://private.test/hook", "https://[::ffff:127.0.0.1]/hook", "https://0.0.0.0/hook",
		"https://100.64.0.1/hook", "https://[fe80::1]/hook", "http://example.com/hook",
	} {
		r := s.do(t, "POST", "/v1/webhooks", map[string]any{"url": url, "events": []string{"message.sent"}})
		if r.Status != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "url") {
			t.Errorf("%s: %d %s, want 422 naming url", url, r.Status, r.Body)
		}
	}
	// Registered as public, dialled as loopback.
	rcv := hookrecv.Start(t)
	port := rcv.URL[strings.LastIndex(rcv.URL, ":"):]
	hookID, _ := s.createHook(t, "https://localhost"+port+"/hook", "message.sent")
	inbox := s.createInbox(t, "guarded")
	mustStatus(t, s.sendMessage(t, inbox, "ann@example.com"), http.StatusCreated)
	deadline := time.Now().Add(hookTimeout)
	var ep map[string]any
	for {
		ep = s.do(t, "GET", "/v1/webhooks/"+hookID, nil).JSON(t)
		if ep["enabled"] == false || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if ep["enabled"] != false || !strings.HasPrefix(ep["disabled_reason"].(string), "refused") {
		t.Fatalf("an endpoint rebound to loopback is %v, want disabled, refused", ep)
	}
	if n := dials.Load(); n != 0 {
		t.Fatalf("%d addresses dialled, want none", n)
	}
	if n := len(rcv.Requests()); n != 0 {
		t.Fatalf("the loopback receiver got %d requests, want none", n)
	}

	// At most 100 endpoints (each event is a job per endpoint); an event
	// type named twice is kept once.
	for i := 1; i < 100; i++ {
		r := s.do(t, "POST", "/v1/webhooks", map[string]any{"url": "https://93.184.216.34/hook",
			"events": []string{"message.canceled", "message.canceled"}})
		mustStatus(t, r, http.StatusCreated)
		if ev := r.JSON(t)["events"].([]any); len(ev) != 1 {
			t.Fatalf("events %v, want message.canceled once", ev)
		}
	}
	r := s.do(t, "POST", "/v1/webhooks", map[string]any{"url": "https://93.184.216.34/hook", "events": []string{"message.canceled"}})
	if r.Status != http.StatusConflict || r.JSON(t)["code"] != "too_many_webhooks" {
		t.Fatalf("the 101st endpoint: %d %s, want 409 too_many_webhooks", r.Status, r.Body)
	}
}

// TestRespondAsync is Prefer: respond-async with a relay that hangs: the
// POST answers 202 queued, with Preference-Applied, while the relay holds
// the message; once it answers, the outcome arrives as message.sent.
// Without the header nothing changes; Prefer: respond-sync under
// SEND_RESPOND_ASYNC asks for the old answer. (The POST's latency is
// measured, not asserted: BenchmarkRespondAsyncHungRelay.)
func TestRespondAsync(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, webhookConfig)
		rcv := hookrecv.Start(t)
		s.createHook(t, rcv.URL, "message.queued", "message.sent", "message.failed")
		inbox := s.createInbox(t, "async")
		hold := s.SMTP.HoldAt(smtptest.AtData)
		r := s.sendMessage(t, inbox, "ann@example.com", "Prefer", "respond-async")
		mustStatus(t, r, http.StatusAccepted)
		if r.Header.Get("Preference-Applied") != "respond-async" || r.JSON(t)["status"] != "queued" {
			t.Fatalf("async answer %v %s, want Preference-Applied: respond-async and status queued", r.Header, r.Body)
		}
		id := r.JSON(t)["id"].(string)
		select {
		case <-hold.Reached():
		case <-time.After(hookTimeout):
			t.Fatal("the async send never reached the relay")
		}
		if got := s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)["status"]; got != "sending" {
			t.Fatalf("while the relay hangs the message is %v, want sending", got)
		}
		hold.Release()
		// Events are not ordered: wait for both.
		rcv.Wait(t, hookTimeout, "message.queued and message.sent", func(rs []hookrecv.Request) bool {
			return len(hookrecv.Of(rs, "message.sent", id)) == 1 && len(hookrecv.Of(rs, "message.queued", id)) == 1
		})
		if r := s.sendMessage(t, inbox, "bob@example.com"); r.Status != http.StatusCreated || r.Header.Get("Preference-Applied") != "" {
			t.Fatalf("without Prefer: %d %v, want 201 and no Preference-Applied", r.Status, r.Header)
		}
	})
}

// TestRespondAsyncByDefault is SEND_RESPOND_ASYNC=true: 202 without a
// header, 201 for Prefer: respond-sync.
func TestRespondAsyncByDefault(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(c *config.Config) { webhookConfig(c); c.SendRespondAsync = true })
	inbox := s.createInbox(t, "async")
	if r := s.sendMessage(t, inbox, "ann@example.com"); r.Status != http.StatusAccepted || r.Header.Get("Preference-Applied") != "respond-async" {
		t.Fatalf("default async: %d %v", r.Status, r.Header)
	}
	if r := s.sendMessage(t, inbox, "bob@example.com", "Prefer", "respond-sync"); r.Status != http.StatusCreated {
		t.Fatalf("Prefer: respond-sync: %d %s, want 201", r.Status, r.Body)
	}
}

// TestWebhooksOutDeliveryEvents: a provider's hard bounce for a message
// reaches the application as message.bounced, with the recipient and the
// provider's detail, and as recipient.suppressed; a delay as
// message.delayed; and a suppression added by hand as
// recipient.suppressed without a message.
func TestWebhooksOutDeliveryEvents(t *testing.T) {
	t.Parallel()
	const key = "key-0123456789abcdef0123456789abcdef"
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { webhookConfig(c); c.MailgunWebhookSigningKey = key })
		rcv := hookrecv.Start(t)
		s.createHook(t, rcv.URL, "message.bounced", "message.delayed", "recipient.suppressed")
		inbox := s.createInbox(t, "bounces")
		r := s.sendMessage(t, inbox, "bob@example.test")
		mustStatus(t, r, http.StatusCreated)
		id, providerID := r.JSON(t)["id"].(string), r.JSON(t)["provider_message_id"].(string)
		now := time.Now()
		for _, ev := range []map[string]any{
			mailgunEvent(key, now, "tok-soft", "ev-0", "failed", "temporary", "bob@example.test", providerID),
			mailgunEvent(key, now, "tok-hard", "ev-1", "failed", "permanent", "bob@example.test", providerID),
		} {
			mustStatus(t, s.do(t, "POST", "/webhooks/mailgun", ev), http.StatusOK)
		}
		mustStatus(t, s.do(t, "POST", "/v1/suppressions", map[string]any{"email": "eve@example.test"}), http.StatusCreated)
		reqs := rcv.Wait(t, hookTimeout, "the bounce, the delay and two suppressions", func(rs []hookrecv.Request) bool {
			return len(hookrecv.Of(rs, "message.bounced", id)) == 1 && len(hookrecv.Of(rs, "message.delayed", id)) == 1 &&
				len(hookrecv.Of(rs, "recipient.suppressed", "")) == 2
		})
		var bounce struct {
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(hookrecv.Of(reqs, "message.bounced", id)[0].Body, &bounce); err != nil {
			t.Fatal(err)
		}
		if bounce.Data["recipient"] != "bob@example.test" || !strings.Contains(bounce.Data["detail"].(string), "5.1.1") ||
			bounce.Data["status"] != "sent" {
			t.Errorf("message.bounced data %v, want bob, the SMTP status, the message as sent", bounce.Data)
		}
		var byHand bool
		for _, q := range hookrecv.Of(reqs, "recipient.suppressed", "") {
			body := string(q.Body)
			byHand = byHand || strings.Contains(body, `"recipient":"eve@example.test"`) && strings.Contains(body, `"detail":"manual"`)
		}
		if !byHand {
			t.Errorf("no recipient.suppressed for eve, added by hand")
		}
	})
}
