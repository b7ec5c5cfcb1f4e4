package tests

import (
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/smtptest"
)

// TestSIGTERMDrainsSendsInFlight: SIGTERM with 100 sends in flight; each
// finishes and is recorded, a request arriving during the drain gets 503
// with Retry-After (not a reset connection), and the process exits 0.
func TestSIGTERMDrainsSendsInFlight(t *testing.T) {
	const n = 100
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		// A limit only so that /v1/rate-limit reports what is in flight.
		env := procEnv(t, driver, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=1000")
		p := startProc(t, env)
		inbox := p.createInbox(t, "support")
		mx.DelayDataReply(150 * time.Millisecond) // four connections: about 4 s for all

		res := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { res[i] = p.send(t, inbox, "bob@customer.test") })
		}
		deadline := time.Now().Add(30 * time.Second)
		for {
			w := p.rateLimitWindow(t, "per_minute")
			if w["used"].(float64)+w["in_flight"].(float64) == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("sends never all in flight: %v", w)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}

		// During the drain a new request is refused politely.
		drainDeadline := time.Now().Add(10 * time.Second)
		for {
			req, _ := http.NewRequest("GET", p.URL+"/v1/inboxes", nil)
			req.Close = true
			r, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatalf("request during the drain: %v (want a 503, not a broken connection)", err)
			}
			r.Body.Close()
			if r.StatusCode == http.StatusServiceUnavailable {
				if r.Header.Get("Retry-After") == "" {
					t.Error("503 during the drain has no Retry-After")
				}
				break
			}
			if time.Now().After(drainDeadline) {
				t.Fatalf("still %d during the drain, want 503", r.StatusCode)
			}
			time.Sleep(5 * time.Millisecond)
		}

		wg.Wait()
		if err := p.wait(t); err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
		for i, r := range res {
			if r.Status != http.StatusCreated || r.JSON(t)["status"] != "sent" {
				t.Fatalf("send %d: %d %s, want 201 sent", i, r.Status, r.Body)
			}
		}
		if c := mx.Count(); c != n {
			t.Errorf("SMTP server received %d, want %d", c, n)
		}
		mx.DelayDataReply(0)
		again := startProc(t, env)
		r := again.do(t, "GET", "/v1/messages?inbox_id="+inbox+"&limit=500", nil)
		mustStatus(t, r, http.StatusOK)
		items := r.JSON(t)["items"].([]any)
		sent := 0
		for _, it := range items {
			if it.(map[string]any)["status"] == "sent" {
				sent++
			}
		}
		if len(items) != n || sent != n {
			t.Errorf("rows after the restart: %d, %d sent; want %d sent", len(items), sent, n)
		}
	})
}
