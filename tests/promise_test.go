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

// rateLimitWindow reads one window of GET /v1/rate-limit.
func (s *server) rateLimitWindow(t *testing.T, name string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/rate-limit", nil)
	mustStatus(t, r, http.StatusOK)
	w, _ := r.JSON(t)[name].(map[string]any)
	return w
}

// TestDeletedInboxStillCounts is hole 1: deleting an inbox deleted its
// messages, and a restart rebuilt the throttle from the messages left.
func TestDeletedInboxStillCounts(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		env := procEnv(t, driver, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=2")
		p := startProc(t, env)
		a, b := p.createInbox(t, "a"), p.createInbox(t, "b")
		mustStatus(t, p.send(t, a, "bob@customer.test"), http.StatusCreated)
		mustStatus(t, p.send(t, a, "bob@customer.test"), http.StatusCreated)
		mustStatus(t, p.do(t, "DELETE", "/v1/inboxes/"+a, nil), http.StatusNoContent)
		if err := p.terminate(t); err != nil {
			t.Fatalf("exit: %v", err)
		}

		again := startProc(t, env)
		mustStatus(t, again.send(t, b, "bob@customer.test"), http.StatusTooManyRequests)
		if n := mx.Count(); n != 2 {
			t.Errorf("SMTP server received %d, want 2", n)
		}
	})
}

// TestKillDuringDataCountsAcrossRestarts: the server is killed with -9
// while the SMTP server holds the reply to DATA, so the message was handed
// over and its fate is unknown. After a restart no row is left sending,
// nothing was sent twice, and the send counts against the throttle from
// the restart, not from its creation (hole 2); it still counts after a
// second restart (hole 3).
func TestKillDuringDataCountsAcrossRestarts(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestSIGTERMWaitsForTheLongestLease
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		mx.DelayDataReply(time.Hour)
		env := procEnv(t, driver, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=1")
		p := startProc(t, env)
		inbox := p.createInbox(t, "support")
		// The request never gets its answer: the server dies under it.
		go http.Post(p.URL+"/v1/messages", "application/json", strings.NewReader(
			`{"inbox_id":"`+inbox+`","to":["bob@customer.test"],"subject":"Hello","body":"hi"}`))
		mx.WaitForCount(t, 1)
		// Long enough that counting from created_at would free the slot
		// visibly earlier than counting from the restart.
		time.Sleep(3 * time.Second)
		p.kill(t)

		for restart := 1; restart <= 2; restart++ {
			again := startProc(t, env)
			w := again.rateLimitWindow(t, "per_minute")
			if w["used"] != float64(1) || w["in_flight"] != float64(0) {
				t.Errorf("restart %d: per_minute = %v, want used 1, in_flight 0", restart, w)
			}
			if reset, _ := w["reset_seconds"].(float64); restart == 1 && reset < 59 {
				t.Errorf("restart %d: reset_seconds = %v, want ≥ 59 (counted from the restart, not from its creation 3 s before the kill)", restart, reset)
			}
			mustStatus(t, again.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
			r := again.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil)
			mustStatus(t, r, http.StatusOK)
			items := r.JSON(t)["items"].([]any)
			if len(items) != 1 {
				t.Fatalf("restart %d: %d messages, want 1", restart, len(items))
			}
			m := items[0].(map[string]any)
			if e, _ := m["error"].(string); m["status"] != "failed" || !strings.Contains(e, "delivery unknown") {
				t.Errorf("restart %d: message status %v error %v, want failed, delivery unknown", restart, m["status"], m["error"])
			}
			if err := again.terminate(t); err != nil {
				t.Fatalf("restart %d: exit: %v", restart, err)
			}
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("SMTP server received %d, want 1 (never sent twice)", n)
		}
	})
}

// TestHeadersAgreeWithRetryAfter is hole 6: with both windows full the
// headers described the per-minute window while Retry-After described the
// per-hour one.
func TestHeadersAgreeWithRetryAfter(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute, c.SendRateLimitPerHour = 1, 1 })
		inbox := s.createInbox(t, "support")
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
		before := time.Now()
		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusTooManyRequests)
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || retry < 3599 {
			t.Fatalf("Retry-After = %q, want the per-hour wait", r.Header.Get("Retry-After"))
		}
		if got, want := r.Header.Get("RateLimit"), `"per-hour";r=0;t=`+strconv.Itoa(retry); got != want {
			t.Errorf("RateLimit = %q, want %q", got, want)
		}
		if got := r.Header.Get("X-RateLimit-Limit"); got != "1" {
			t.Errorf("X-RateLimit-Limit = %q, want 1", got)
		}
		reset, _ := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64)
		if lo, hi := before.Unix()+int64(retry), time.Now().Unix()+int64(retry)+1; reset < lo || reset > hi {
			t.Errorf("X-RateLimit-Reset = %d, want within [%d, %d]: now + Retry-After", reset, lo, hi)
		}
		body := r.JSON(t)
		if body["retry_after"] != float64(retry) {
			t.Errorf("retry_after = %v, want %d", body["retry_after"], retry)
		}
	})
}

// TestUnknownOutcomeCounts is hole 8: the SMTP server takes the message and
// answers after the client's deadline. The row says delivery is unknown,
// the send is not retried, and it counts against the throttle.
func TestUnknownOutcomeCounts(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) {
			c.SendRateLimitPerMinute, c.SMTPTimeout = 1, 500*time.Millisecond
		})
		s.SMTP.DelayDataReply(2 * time.Second)
		inbox := s.createInbox(t, "support")
		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		m := r.JSON(t)
		if e, _ := m["error"].(string); m["status"] != "failed" || !strings.Contains(e, "delivery unknown") {
			t.Errorf("send = status %v error %v, want failed, delivery unknown", m["status"], m["error"])
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) {
			t.Errorf("per_minute = %v, want used 1: a send that may have gone out counts", w)
		}
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
		if n := s.SMTP.Count(); n != 1 {
			t.Errorf("SMTP server received %d, want 1 (no retry once the message was handed over)", n)
		}
	})
}

// TestTemporaryFailuresAreRetried: 451 twice then 250 is one email, sent,
// one slot; 550 is not retried, failed, and the slot comes back.
func TestTemporaryFailuresAreRetried(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 2 })
		inbox := s.createInbox(t, "support")

		s.SMTP.RejectDataTimes(2, 451, [3]int{4, 3, 0}, "try again later")
		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		if st := r.JSON(t)["status"]; st != "sent" {
			t.Fatalf("status after 451, 451, 250 = %v, want sent", st)
		}
		if n := s.SMTP.Count(); n != 1 {
			t.Errorf("SMTP server stored %d, want 1", n)
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) {
			t.Errorf("per_minute = %v, want used 1 (one slot for three attempts)", w)
		}

		s.SMTP.RejectData(550, [3]int{5, 7, 1}, "rejected by policy")
		s.SMTP.RejectDataTimes(1, 550, [3]int{5, 7, 1}, "rejected by policy")
		r = s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		m := r.JSON(t)
		if e, _ := m["error"].(string); m["status"] != "failed" || !strings.Contains(e, "550") {
			t.Errorf("550 = status %v error %v, want failed naming 550", m["status"], m["error"])
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) || w["in_flight"] != float64(0) {
			t.Errorf("per_minute = %v, want used 1: the refused send gave its slot back", w)
		}
		s.SMTP.AcceptData()
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
		if n := s.SMTP.Count(); n != 2 {
			t.Errorf("SMTP server stored %d, want 2", n)
		}
	})
}

// An unlimited window shows its counts, as the metrics do, with no
// remaining or reset (issue 20, item 8: used read null here and a number
// in the metrics).
func TestUnlimitedWindowShowsItsCounts(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "sqlite", func(cfg *config.Config) { cfg.SendRateLimitPerMinute = 10 }) // the hour unlimited
	inbox := s.createInbox(t, "support")
	mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
	w := s.rateLimitWindow(t, "per_hour")
	if w["limit"] != float64(0) || w["used"] != float64(1) || w["in_flight"] != float64(0) ||
		w["remaining"] != nil || w["reset_seconds"] != nil {
		t.Errorf("unlimited per_hour = %v, want limit 0, used 1, in_flight 0, remaining and reset_seconds null", w)
	}
	m := s.do(t, "GET", "/metrics", nil)
	if !strings.Contains(string(m.Body), `nornweave_throttle_window_used{window="per-hour"} 1`) {
		t.Errorf("metrics lack the same count:\n%s", m.Body)
	}
}
