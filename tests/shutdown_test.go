package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TestSIGTERMDrainsSendsInFlight: SIGTERM with 100 sends in flight; each
// finishes and is recorded, a request arriving during the drain gets 503
// with Retry-After (not a reset connection), and the process exits 0.
func TestSIGTERMDrainsSendsInFlight(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestSIGTERMWaitsForTheLongestLease
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

// The drain at SIGTERM waits for the longest lease in flight (issue 15,
// item 7): it was a fixed 90 s, shorter than a send retrying under a
// SEND_RETRY_DEADLINE of 95 s, and such sends were abandoned — the client
// got a closed connection and the row "interrupted … delivery unknown",
// counted, though every attempt had been refused with 451. It runs beside
// the other tests: it waits out the retries.
func TestSIGTERMWaitsForTheLongestLease(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	env := procEnv(t, "sqlite", mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10",
		"SEND_RETRY_DEADLINE=95s", "SEND_RETRY_MAX=1000", "SEND_TIMEOUT=5s")
	p := startProc(t, env)
	inbox := p.createInbox(t, "support")
	mx.RejectData(451, [3]int{4, 3, 0}, "try again later") // every attempt, until the deadline

	sent := make(chan response, 1)
	go func() { sent <- p.send(t, inbox, "bob@customer.test") }()
	waitFor(t, 10*time.Second, func() bool { return strings.Contains(p.log.String(), "retrying") })
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		t.Fatalf("exited after %v (%v) with a send still retrying\n%s", time.Since(start), err, p.log.String())
	case r := <-sent:
		if r.Status != http.StatusCreated || r.JSON(t)["status"] != "failed" ||
			!strings.Contains(fmt.Sprint(r.JSON(t)["error"]), "451") {
			t.Fatalf("the retrying send answered %d %s; want 201 failed with the relay's 451", r.Status, r.Body)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("no answer 3 minutes after SIGTERM")
	}
	if err := p.wait(t); err != nil {
		t.Fatalf("exit after the drain: %v", err)
	}
	if !strings.Contains(p.log.String(), `"sends_abandoned":0`) {
		t.Errorf("the drain abandoned a send:\n%s", p.log.String())
	}
}
