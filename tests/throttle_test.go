package tests

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/store"
)

func TestThrottleRefusesTheSixth(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 5 })
		inbox := s.createInbox(t, "support")
		for i := 0; i < 5; i++ {
			r := s.send(t, inbox, "bob@customer.test")
			mustStatus(t, r, http.StatusCreated)
			if got := r.Header.Get("X-RateLimit-Remaining"); got != strconv.Itoa(4-i) {
				t.Errorf("send %d: X-RateLimit-Remaining = %q, want %d", i+1, got, 4-i)
			}
		}
		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusTooManyRequests)
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || retry < 1 || retry > 61 {
			t.Errorf("Retry-After = %q, want whole seconds in 1..61", r.Header.Get("Retry-After"))
		}
		body := r.JSON(t)
		if body["detail"] != "Rate limit exceeded: per-minute limit reached (5/5)" || body["code"] != "rate_limited" ||
			body["retry_after"] != float64(retry) {
			t.Errorf("429 body = %v", body)
		}
		if v, _ := body["violated"].([]any); len(v) != 1 || v[0] != "per-minute" {
			t.Errorf("violated = %v, want [per-minute]", body["violated"])
		}
		if n := s.SMTP.Count(); n != 5 {
			t.Errorf("SMTP server received %d, want exactly 5", n)
		}

		r = s.do(t, "GET", "/v1/rate-limit", nil)
		mustStatus(t, r, http.StatusOK)
		state := r.JSON(t)
		minute := state["per_minute"].(map[string]any)
		if minute["limit"] != float64(5) || minute["used"] != float64(5) || minute["remaining"] != float64(0) ||
			minute["in_flight"] != float64(0) {
			t.Errorf("per_minute = %v", minute)
		}
		// Unlimited: its counts, as the metrics show them (issue 20, item 8),
		// and null remaining and reset_seconds, which a client reads as
		// "unlimited".
		if hour := state["per_hour"].(map[string]any); hour["limit"] != float64(0) || hour["used"] != float64(5) ||
			hour["remaining"] != nil || hour["reset_seconds"] != nil {
			t.Errorf("per_hour = %v, want unlimited: limit 0, used 5, remaining and reset_seconds null", hour)
		}
	})
}

func TestThrottleUnderConcurrency(t *testing.T) {
	t.Parallel()
	const clients, limit = 200, 20
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = limit })
		inbox := s.createInbox(t, "support")

		statuses := make(chan response, clients)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := 0; i < clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				statuses <- s.send(t, inbox, "bob@customer.test")
			}()
		}
		close(start)
		wg.Wait()
		close(statuses)

		counts := map[int]int{}
		for r := range statuses {
			counts[r.Status]++
			if r.Status == http.StatusCreated {
				var st string
				if err := jsonField(r.Body, "status", &st); err != nil || st != "sent" {
					t.Errorf("201 with status %q, want sent", st)
				}
			}
		}
		if counts[http.StatusCreated] != limit || counts[http.StatusTooManyRequests] != clients-limit {
			t.Fatalf("statuses = %v, want %d×201 and %d×429", counts, limit, clients-limit)
		}
		if n := s.SMTP.Count(); n != limit {
			t.Errorf("SMTP server received %d, want exactly %d", n, limit)
		}
		r := s.do(t, "GET", "/v1/messages?inbox_id="+inbox+"&limit=500", nil)
		mustStatus(t, r, http.StatusOK)
		if total := r.JSON(t)["total"]; total != float64(limit) {
			t.Errorf("messages recorded = %v, want %d (a refused send leaves no row)", total, limit)
		}
	})
}

func TestThrottleSurvivesRestart(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 2 })
		inbox := s.createInbox(t, "support")
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
		mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
		s.Stop()

		again := start(t, s.cfg, s.SMTP)
		r := again.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusTooManyRequests)
		if n := s.SMTP.Count(); n != 2 {
			t.Errorf("SMTP server received %d across the restart, want 2", n)
		}
	})
}

// TestCrashMidSendCountsAndIsResolved simulates a server that died after
// recording a send as "sending" and before the provider answered: the
// message may have gone out, so after the restart it counts against the
// throttle, and it is marked failed with a reason instead of staying
// "sending" for ever.
func TestCrashMidSendCountsAndIsResolved(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "support")
		s.Stop()

		st, err := app.OpenStore(context.Background(), s.cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC()
		orphan := &store.Message{InboxID: inbox, Status: store.StatusSending, Subject: "s",
			MessageIDHeader: "<orphan@acme.test>", FromAddress: "support@acme.test", CreatedAt: now}
		thread := &store.Thread{InboxID: inbox, Subject: "s", ParticipantHash: "h"}
		slot := &store.SendSlot{ReservedAt: now, Deadline: now.Add(time.Minute)}
		if err := st.CreateMessage(context.Background(), orphan, nil, thread, slot); err != nil {
			t.Fatal(err)
		}
		st.Close()

		again := start(t, s.cfg, s.SMTP)
		mustStatus(t, again.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
		r := again.do(t, "GET", "/v1/messages/"+orphan.ID, nil)
		mustStatus(t, r, http.StatusOK)
		m := r.JSON(t)
		if e, _ := m["error"].(string); m["status"] != "failed" || !strings.Contains(e, "delivery unknown") {
			t.Errorf("interrupted message = status %v error %v, want failed with delivery unknown", m["status"], m["error"])
		}
	})
}
