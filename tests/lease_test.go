package tests

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// An SMTP transaction cannot outlive its send's lease (issue 15, item 1):
// go-mail reset the connection's deadline to SMTP_TIMEOUT when a
// transaction started, so with SMTP_TIMEOUT=600s a relay slow to answer
// took a message long after the lease at whose end the throttle had
// already counted it. Here the lease is short (SEND_TIMEOUT 2 s,
// SEND_RETRY_DEADLINE 1 s: 3 s and a little for the transfer) and the
// relay stalls for longer, before the 354 or before the final reply: the
// answer comes by the end of the lease; a message not handed over by then
// never reaches the relay, even once it stops stalling, and counts
// nothing; one handed over counts, and a second send within the minute is
// refused with a Retry-After that covers a minute from the relay's
// receipt. (The providers' tests cover every stage of the session.)
func TestSMTPTransactionEndsWithItsLease(t *testing.T) {
	t.Parallel()
	const stall = 8 * time.Second
	for _, c := range []struct {
		name    string
		stage   smtptest.Stage
		taken   bool // the relay has the message when the lease ends
		outcome string
	}{
		{"final reply", smtptest.BeforeReply, true, "delivery unknown"},
		{"354", smtptest.AtData, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startDefault(t, "sqlite", func(cfg *config.Config) {
				cfg.SMTPTimeout, cfg.SendTimeout, cfg.SendRetryDeadline = 600*time.Second, 2*time.Second, time.Second
				cfg.SendRateLimitPerMinute = 1
			})
			inbox := s.createInbox(t, "support")
			s.SMTP.Stall(c.stage, stall)
			start := time.Now()
			r := s.send(t, inbox, "bob@customer.test")
			took := time.Since(start)
			mustStatus(t, r, http.StatusCreated)
			const lease = 3*time.Second + 500*time.Millisecond // retry deadline + attempt + transfer, generously
			if took > lease+2*time.Second {
				t.Errorf("the answer came %v after the request, past the lease of about 3 s", took)
			}
			m := r.JSON(t)
			if m["status"] != "failed" || (c.outcome != "" && !strings.Contains(m["error"].(string), c.outcome)) {
				t.Errorf("send = %v, want failed %q", m, c.outcome)
			}
			if !c.taken {
				s.SMTP.Stall(c.stage, 0)
				s.SMTP.WaitIdle(t) // the first session's stall is over, its connection long closed
				if n := s.SMTP.Count(); n != 0 {
					t.Fatalf("the relay got %d messages after its stall, from a send cut off before the content", n)
				}
				r := s.send(t, inbox, "bob@customer.test") // nothing was counted: room for it
				if mustStatus(t, r, http.StatusCreated); r.JSON(t)["status"] != "sent" {
					t.Fatalf("second send: %s, want sent", r.Body)
				}
				return
			}
			msgs := s.SMTP.Messages()
			if len(msgs) != 1 {
				t.Fatalf("relay received %d messages, want one", len(msgs))
			}
			if after := msgs[0].Received.Sub(start); after > lease {
				t.Fatalf("relay received the message %v after the request; want it within the lease", after)
			}
			refused := s.send(t, inbox, "bob@customer.test")
			mustStatus(t, refused, http.StatusTooManyRequests)
			retry, _ := strconv.Atoi(refused.Header.Get("Retry-After"))
			if free := time.Now().Add(time.Duration(retry) * time.Second); free.Before(msgs[0].Received.Add(time.Minute)) {
				t.Errorf("Retry-After %d s frees the window at %v, before a minute from the relay's receipt at %v",
					retry, free, msgs[0].Received)
			}
		})
	}
}
