package tests

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

func keyedBody(inbox, subject string) map[string]any {
	return map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"}, "subject": subject, "body": "hi"}
}

// TestIdempotencyKeyConcurrent sends one key 50 times at once: one email,
// one row, one throttle slot; every other answer is a replay of the first
// response or a 409 while it is in flight.
func TestIdempotencyKeyConcurrent(t *testing.T) {
	t.Parallel()
	const n = 50
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 5 })
		inbox := s.createInbox(t, "support")
		body := keyedBody(inbox, "Once")

		res := make([]response, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				res[i] = s.do(t, "POST", "/v1/messages", body, "Idempotency-Key", "order-42")
			})
		}
		close(start)
		wg.Wait()

		var created, replays, conflicts int
		var first string
		for _, r := range res {
			switch {
			case r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "true":
				replays++
				if first != "" && string(r.Body) != first {
					t.Errorf("replay body %s differs from %s", r.Body, first)
				}
			case r.Status == http.StatusCreated:
				created++
				first = string(r.Body)
			case r.Status == http.StatusConflict:
				conflicts++
				if code := r.JSON(t)["code"]; code != "idempotency_key_in_flight" {
					t.Errorf("409 code = %v", code)
				}
			default:
				t.Errorf("unexpected answer %d %s", r.Status, r.Body)
			}
		}
		if created != 1 || replays+conflicts != n-1 {
			t.Fatalf("got %d created, %d replays, %d conflicts; want 1 created and %d others", created, replays, conflicts, n-1)
		}
		if c := s.SMTP.Count(); c != 1 {
			t.Errorf("SMTP server received %d, want 1", c)
		}
		r := s.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil)
		if total := r.JSON(t)["total"]; total != float64(1) {
			t.Errorf("rows = %v, want 1", total)
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) || w["in_flight"] != float64(0) {
			t.Errorf("per_minute = %v, want one slot", w)
		}

		// A replay afterwards: the same response, nothing sent, nothing taken.
		again := s.do(t, "POST", "/v1/messages", body, "Idempotency-Key", "order-42")
		mustStatus(t, again, http.StatusCreated)
		if again.Header.Get("Idempotent-Replayed") != "true" || string(again.Body) != first {
			t.Errorf("late replay = %s %v, want %s replayed", again.Body, again.Header, first)
		}
		// The same key with another request is refused.
		other := s.do(t, "POST", "/v1/messages", keyedBody(inbox, "Something else"), "Idempotency-Key", "order-42")
		mustStatus(t, other, http.StatusUnprocessableEntity)
		if code := other.JSON(t)["code"]; code != "idempotency_key_reused" {
			t.Errorf("reuse code = %v", code)
		}
		if c := s.SMTP.Count(); c != 1 {
			t.Errorf("SMTP server received %d after replays, want 1", c)
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) {
			t.Errorf("per_minute = %v after replays, want still one slot", w)
		}
	})
}

// TestIdempotencyKeyRetryAfterRefusal: a 429 is not remembered, so the
// client's retry with the same key is a real attempt; and a bad key is 422.
func TestIdempotencyKeyRetryAfterRefusal(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "support")
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
		r := s.do(t, "POST", "/v1/messages", keyedBody(inbox, "Later"), "Idempotency-Key", "k1")
		mustStatus(t, r, http.StatusTooManyRequests)
		r = s.do(t, "POST", "/v1/messages", keyedBody(inbox, "Later"), "Idempotency-Key", "k1")
		if r.Status != http.StatusTooManyRequests || r.Header.Get("Idempotent-Replayed") != "" {
			t.Errorf("retry after 429 = %d replayed %q, want a fresh 429", r.Status, r.Header.Get("Idempotent-Replayed"))
		}
		long := make([]byte, 256)
		for i := range long {
			long[i] = 'k'
		}
		for _, key := range []string{string(long), "tab\tkey", "ключ"} {
			r := s.do(t, "POST", "/v1/messages", keyedBody(inbox, "x"), "Idempotency-Key", key)
			mustStatus(t, r, http.StatusUnprocessableEntity)
		}
	})
}

// TestIdempotencyKeyReplaysAfterRestart: the key is durable.
func TestIdempotencyKeyReplaysAfterRestart(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		env := procEnv(t, driver, mx)
		p := startProc(t, env)
		inbox := p.createInbox(t, "support")
		first := p.do(t, "POST", "/v1/messages", keyedBody(inbox, "Once"), "Idempotency-Key", "k-restart")
		mustStatus(t, first, http.StatusCreated)
		if err := p.terminate(t); err != nil {
			t.Fatal(err)
		}
		again := startProc(t, env)
		r := again.do(t, "POST", "/v1/messages", keyedBody(inbox, "Once"), "Idempotency-Key", "k-restart")
		mustStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(first.Body) {
			t.Errorf("after restart: %s replayed %q, want %s replayed", r.Body, r.Header.Get("Idempotent-Replayed"), first.Body)
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("SMTP server received %d, want 1", n)
		}
	})
}

// TestIdempotencyKeyAfterCrash: the server dies while the key's send is in
// flight. After the restart the key answers with the send as recorded
// (failed, delivery unknown) instead of sending again or staying 409.
func TestIdempotencyKeyAfterCrash(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		mx.DelayDataReply(time.Hour)
		env := procEnv(t, driver, mx)
		p := startProc(t, env)
		inbox := p.createInbox(t, "support")
		body := `{"inbox_id":"` + inbox + `","to":["bob@customer.test"],"subject":"Once","body":"hi"}`
		go func() {
			req, _ := http.NewRequest("POST", p.URL+"/v1/messages", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", "k-crash")
			http.DefaultClient.Do(req)
		}()
		mx.WaitForCount(t, 1)
		p.kill(t)

		again := startProc(t, env)
		r := again.do(t, "POST", "/v1/messages", body, "Idempotency-Key", "k-crash")
		mustStatus(t, r, http.StatusCreated)
		m := r.JSON(t)
		if e, _ := m["error"].(string); r.Header.Get("Idempotent-Replayed") != "true" || m["status"] != "failed" ||
			!strings.Contains(e, "delivery unknown") {
			t.Errorf("after the crash: %s replayed %q, want the interrupted send replayed", r.Body, r.Header.Get("Idempotent-Replayed"))
		}
		if n := mx.Count(); n != 1 {
			t.Errorf("SMTP server received %d, want 1", n)
		}
	})
}
