package tests

import (
	"net/http"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TestQueuedSendNoticesASlotGivenBack: a send queued behind one in flight
// is told a Retry-After that assumes the one in flight may still go out at
// the end of its lease (over a minute here), and a window after that. When
// that send fails instead and gives its slot back, the queued one goes out
// within seconds, not minutes: held mail asks the throttle again after at
// most heldRecheck while the windows hold sends in flight.
func TestQueuedSendNoticesASlotGivenBack(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startHeld(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "recheck")
		s.SMTP.Stall(smtptest.AtMail, 2*time.Second)
		s.SMTP.RejectData(550, [3]int{5, 1, 1}, "no such user")
		first := make(chan response, 1)
		go func() { first <- s.send(t, inbox, "gone@example.com") }()
		// The first send holds the window's one slot while it waits on
		// the relay; the second is refused and queued behind it.
		waitFor(t, 10*time.Second, func() bool { return s.SMTP.Connections() > 0 })
		r := s.queue(t, inbox, "bob@example.com")
		mustStatus(t, r, http.StatusAccepted)
		queued := r.JSON(t)
		if queued["status"] != "queued" {
			t.Fatalf("second send answered %s, want queued", r.Body)
		}
		r = <-first
		t.Logf("first send: %d %s", r.Status, r.Body)
		s.SMTP.Stall(smtptest.AtMail, 0)
		s.SMTP.AcceptData()
		failedAt := time.Now()
		id := queued["id"].(string)
		// Without the recheck the queued send waits its Retry-After: the
		// first send's lease (over a minute) and a window.
		waitFor(t, 30*time.Second, func() bool { return s.status(t, id) == "sent" })
		t.Logf("queued send went out %v after the first failed", time.Since(failedAt).Round(time.Millisecond))
		if n := s.SMTP.Count(); n != 1 {
			t.Fatalf("relay received %d messages, want 1 (the queued one)", n)
		}
	})
}
