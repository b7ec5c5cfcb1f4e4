package tests

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// violated returns a 429's "violated" list, joined.
func violated(t *testing.T, r response) string {
	t.Helper()
	mustStatus(t, r, http.StatusTooManyRequests)
	var names []string
	for _, v := range r.JSON(t)["violated"].([]any) {
		names = append(names, v.(string))
	}
	return strings.Join(names, ", ")
}

func (s *server) inboxWindow(t *testing.T, inbox, name string) map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/inboxes/"+inbox+"/rate-limit", nil)
	mustStatus(t, r, http.StatusOK)
	return r.JSON(t)[name].(map[string]any)
}

// TestInboxLimitIsolatesInboxes: inbox A at its own limit does not stop
// inbox B; the global limit still caps the sum of all inboxes; and a send
// refused by one window holds nothing in the other.
func TestInboxLimitIsolatesInboxes(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) {
			c.SendRateLimitPerMinute, c.InboxSendRateLimitPerMinute = 3, 2
		})
		a, b, c := s.createInbox(t, "a"), s.createInbox(t, "b"), s.createInbox(t, "c")
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated)
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated)
		r := s.send(t, a, "x@customer.test")
		if got := violated(t, r); got != "inbox-per-minute" {
			t.Errorf("A's third: violated %q, want inbox-per-minute", got)
		}
		if got := r.Header.Get("RateLimit"); !strings.HasPrefix(got, `"inbox-per-minute";r=0;t=`) {
			t.Errorf("RateLimit = %q, want the inbox window", got)
		}
		if !strings.Contains(r.JSON(t)["detail"].(string), "inbox-per-minute limit reached (2/2)") {
			t.Errorf("detail = %v", r.JSON(t)["detail"])
		}
		// The refusal by A's window took nothing from the global one.
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(2) || w["in_flight"] != float64(0) {
			t.Errorf("global after A's refusal = %v, want used 2", w)
		}
		mustStatus(t, s.send(t, b, "x@customer.test"), http.StatusCreated)
		// Global full: C is refused by the global window, and its own
		// window is left untouched.
		if got := violated(t, s.send(t, c, "x@customer.test")); got != "per-minute" {
			t.Errorf("C at the global limit: violated %q, want per-minute", got)
		}
		if w := s.inboxWindow(t, c, "per_minute"); w["used"] != float64(0) || w["in_flight"] != float64(0) || w["limit"] != float64(2) {
			t.Errorf("C's window after a global refusal = %v, want limit 2, nothing used", w)
		}
		if w := s.inboxWindow(t, a, "per_minute"); w["used"] != float64(2) || w["remaining"] != float64(0) {
			t.Errorf("A's window = %v, want used 2, remaining 0", w)
		}
		if n := s.SMTP.Count(); n != 3 {
			t.Errorf("SMTP server received %d, want 3", n)
		}
	})
}

// TestInboxOverrides: PATCH sets, shows and removes an inbox's own limits,
// renames, and refuses everything else.
func TestInboxOverrides(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.InboxSendRateLimitPerMinute, c.InboxSendRateLimitPerHour = 5, 50 })
		a := s.createInbox(t, "a")
		if rl := s.do(t, "GET", "/v1/inboxes/"+a, nil).JSON(t)["rate_limit"]; fmt.Sprint(rl) != "map[per_day:<nil> per_hour:<nil> per_minute:<nil>]" {
			t.Errorf("new inbox rate_limit = %v, want all null (the defaults)", rl)
		}
		r := s.do(t, "PATCH", "/v1/inboxes/"+a, map[string]any{"name": "Sales", "rate_limit": map[string]any{"per_minute": 1}})
		mustStatus(t, r, http.StatusOK)
		got := r.JSON(t)
		if got["name"] != "Sales" || fmt.Sprint(got["rate_limit"]) != "map[per_day:<nil> per_hour:<nil> per_minute:1]" {
			t.Errorf("after PATCH = %v", got)
		}
		if w := s.inboxWindow(t, a, "per_minute"); w["limit"] != float64(1) {
			t.Errorf("window limit = %v, want the override 1", w["limit"])
		}
		if w := s.inboxWindow(t, a, "per_hour"); w["limit"] != float64(50) {
			t.Errorf("hour limit = %v, want the default 50", w["limit"])
		}
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated)
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusTooManyRequests)

		r = s.do(t, "PATCH", "/v1/inboxes/"+a, map[string]any{"rate_limit": map[string]any{"per_minute": nil}})
		mustStatus(t, r, http.StatusOK)
		if rl := r.JSON(t)["rate_limit"]; fmt.Sprint(rl) != "map[per_day:<nil> per_hour:<nil> per_minute:<nil>]" {
			t.Errorf("after removing the override: %v", rl)
		}
		if r.JSON(t)["name"] != "Sales" {
			t.Errorf("a PATCH without name renamed the inbox")
		}
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated) // back to 5 a minute

		for _, tt := range []struct {
			body any
			loc  string
		}{
			{map[string]any{"email_address": "x@acme.test"}, "email_address"},
			{map[string]any{"id": "other"}, "id"},
			{map[string]any{"rate_limit": map[string]any{"per_minute": -1}}, "per_minute"},
			{map[string]any{"rate_limit": map[string]any{"per_day": -1}}, "per_day"},
			{map[string]any{"rate_limit": map[string]any{"per_week": 3}}, "per_week"},
			{map[string]any{"rate_limit": "fast"}, "rate_limit"},
			{map[string]any{"name": ""}, "name"},
		} {
			r := s.do(t, "PATCH", "/v1/inboxes/"+a, tt.body)
			mustStatus(t, r, http.StatusUnprocessableEntity)
			if !strings.Contains(string(r.Body), `"`+tt.loc+`"`) {
				t.Errorf("PATCH %v: 422 %s does not name %s", tt.body, r.Body, tt.loc)
			}
		}
		mustStatus(t, s.do(t, "PATCH", "/v1/inboxes/nonexistent-inbox-id", map[string]any{"name": "x"}), http.StatusNotFound)
		mustStatus(t, s.do(t, "GET", "/v1/inboxes/nonexistent-inbox-id/rate-limit", nil), http.StatusNotFound)
	})
}

// TestInboxLimitUnderConcurrency: 200 concurrent sends from one inbox with
// a limit of 10 a minute deliver exactly 10.
func TestInboxLimitUnderConcurrency(t *testing.T) {
	t.Parallel()
	const clients, limit = 200, 10
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.InboxSendRateLimitPerMinute = limit })
		a := s.createInbox(t, "a")
		codes := make([]int, clients)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range clients {
			wg.Go(func() { <-start; codes[i] = s.send(t, a, "x@customer.test").Status })
		}
		close(start)
		wg.Wait()
		counts := map[int]int{}
		for _, c := range codes {
			counts[c]++
		}
		if counts[http.StatusCreated] != limit || counts[http.StatusTooManyRequests] != clients-limit {
			t.Errorf("statuses = %v, want %d×201, %d×429", counts, limit, clients-limit)
		}
		if n := s.SMTP.Count(); n != limit {
			t.Errorf("SMTP server received %d, want exactly %d", n, limit)
		}
	})
}

// TestInboxCountsSurviveRestart: every inbox's count is rebuilt at start-up.
func TestInboxCountsSurviveRestart(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		mx := smtptest.Start(t)
		env := procEnv(t, driver, mx, "INBOX_SEND_RATE_LIMIT_PER_MINUTE=1")
		p := startProc(t, env)
		a, b, c := p.createInbox(t, "a"), p.createInbox(t, "b"), p.createInbox(t, "c")
		mustStatus(t, p.send(t, a, "x@customer.test"), http.StatusCreated)
		mustStatus(t, p.send(t, b, "x@customer.test"), http.StatusCreated)
		if err := p.terminate(t); err != nil {
			t.Fatal(err)
		}
		again := startProc(t, env)
		for _, in := range []string{a, b} {
			if got := violated(t, again.send(t, in, "x@customer.test")); got != "inbox-per-minute" {
				t.Errorf("after the restart: violated %q, want inbox-per-minute", got)
			}
		}
		mustStatus(t, again.send(t, c, "x@customer.test"), http.StatusCreated)
		if n := mx.Count(); n != 3 {
			t.Errorf("SMTP server received %d, want 3", n)
		}
	})
}

// An inbox deleted and created again with the same address keeps its
// quota (issue 15, item 4: at an inbox limit of 4 a minute, 4 sends,
// delete, re-create, and 2 more went out within 0.4 s): its windows are
// the address's, which is what the provider and the recipients see. On
// both databases, and with each throttle backend.
func TestRecreatedInboxKeepsItsQuota(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, driver, backend string }{
		{"memory sqlite", "sqlite", "memory"}, {"memory postgres", "postgres", "memory"},
		{"postgres", "postgres", "postgres"}, {"redis", "postgres", "redis"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := startDefault(t, c.driver, func(cfg *config.Config) {
				cfg.InboxSendRateLimitPerMinute, cfg.ThrottleBackend = 4, c.backend
				cfg.RedisURL, cfg.RedisKeyPrefix = redistest.URL(), redistest.Prefix(t)
			})
			inbox := s.createInbox(t, "agent")
			for range 4 {
				mustStatus(t, s.send(t, inbox, "bob@customer.test"), http.StatusCreated)
			}
			mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+inbox, nil), http.StatusNoContent)
			again := s.createInbox(t, "agent")
			r := s.send(t, again, "bob@customer.test")
			mustStatus(t, r, http.StatusTooManyRequests)
			if got := violated(t, r); got != "inbox-per-minute" {
				t.Errorf("violated %q, want inbox-per-minute", got)
			}
			if n := s.SMTP.Count(); n != 4 {
				t.Errorf("%d messages at the SMTP server, want 4", n)
			}
		})
	}
}
