package tests

import (
	"net/http"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
	"github.com/nornweave/nornweave/store"
)

// A queued message whose lane sleeps (its inbox may send 1 a minute) is
// failed, expired, within a second of its QUEUE_MAX_AGE deadline, the
// janitor's period, not when its lane next wakes (issue 26: an expiry at
// 20 s was marked failed at 61.7 s). The app runs on a fake clock, which
// the test moves across the deadline.
func TestQueuedMessageExpiresOnTime(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		const maxAge = 10 * time.Second
		mx := smtptest.Start(t)
		cfg := baseConfig(t, driver, mx)
		cfg.InboxSendRateLimitPerMinute, cfg.QueueMaxAge = 1, maxAge
		clock := clocktest.New(time.Now().UTC())
		s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{Clock: clock, RetryBase: heldRetryBase}), SMTP: mx, cfg: cfg}
		inbox := s.createInbox(t, "slow")

		mustStatus(t, s.queue(t, inbox, "first@example.com"), http.StatusCreated)
		r := s.queue(t, inbox, "second@example.com")
		mustStatus(t, r, http.StatusAccepted)
		id := r.JSON(t)["id"].(string)
		due := clock.Now() // accepted now: due now

		clock.Advance(maxAge - time.Second)
		if st := s.status(t, id); st != store.StatusQueued {
			t.Fatalf("%s before its deadline: got %s, want queued", clock.Now().Sub(due), st)
		}
		clock.Advance(2 * time.Second) // the deadline and one janitor period
		m := s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)
		if m["status"] != store.StatusFailed || m["error"] != store.ExpiredError {
			t.Errorf("%s after its deadline: got %v %q, want failed %q", clock.Now().Sub(due)-maxAge, m["status"], m["error"], store.ExpiredError)
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("the relay received %d messages, want the first only", n)
		}
	})
}
