package tests

import (
	"net/http"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/hookrecv"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TestWebhookSurvivesKill9 is issue 30's crash between an event and its
// delivery, with the built binary on both databases: the receiver fails
// the first attempt of message.sent, the server is killed (SIGKILL) while
// the event waits for its retry, and after a restart on the same
// database the event is delivered, once, under its webhook-id.
func TestWebhookSurvivesKill9(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		env := procEnv(t, driver, mx, heldPoll, "WEBHOOK_ALLOW_HTTP=true", "WEBHOOK_ALLOW_PRIVATE_TARGETS=true",
			"WEBHOOK_RETRY_SCHEDULE=3s")
		p := startProc(t, env)
		rcv := hookrecv.Start(t)
		hookID, secret := p.createHook(t, rcv.URL, "message.sent")
		inbox := p.createInbox(t, "crash")
		rcv.Then(hookrecv.Answer{Status: http.StatusInternalServerError})
		r := p.sendMessage(t, inbox, "ann@example.com")
		mustStatus(t, r, http.StatusCreated)
		id := r.JSON(t)["id"].(string)
		first := rcv.Wait(t, hookTimeout, "the first attempt", func(rs []hookrecv.Request) bool {
			return len(hookrecv.Of(rs, "message.sent", id)) == 1
		})
		eventID := hookrecv.Of(first, "message.sent", id)[0].ID()
		p.waitDeliveries(t, hookID, eventID, 1)
		// River records the job's retry just after the attempt's own record
		// (its completer batches): give it that moment, so that the kill
		// finds the event waiting for its retry, not in an attempt that a
		// rescue would take minutes to give back.
		time.Sleep(time.Second)
		p.kill(t)

		p = startProc(t, env)
		got := rcv.Wait(t, hookTimeout, "the delivery after the restart", func(rs []hookrecv.Request) bool {
			qs := hookrecv.Of(rs, "message.sent", id)
			return len(qs) >= 2 && qs[len(qs)-1].Status == http.StatusOK
		})
		time.Sleep(4 * time.Second) // past another retry's time: nothing more may come
		got = hookrecv.Of(rcv.Requests(), "message.sent", id)
		ok := 0
		for _, q := range got {
			if q.ID() != eventID {
				t.Fatalf("webhook-id %q after the restart, want %q", q.ID(), eventID)
			}
			if q.Status == http.StatusOK {
				ok++
				if err := hookrecv.Verify(secret, q); err != nil {
					t.Fatalf("delivery after the restart does not verify: %v", err)
				}
			}
		}
		if ok != 1 || len(got) != 2 {
			t.Fatalf("%d requests, %d delivered, want 2 and 1", len(got), ok)
		}
		if st := statuses(p.waitDeliveries(t, hookID, eventID, 2)); len(st) != 2 || st[0] != 500 || st[1] != 200 {
			t.Fatalf("delivery log %v, want [500 200]", st)
		}
	})
}
