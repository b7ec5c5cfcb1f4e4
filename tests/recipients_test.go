package tests

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/providertest"
	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// Issue 31: recipients as the throttle's unit, and the per-second and
// per-day windows. Most run the memory backend on both databases, on a
// fake clock; TestRecipientsOnSharedBackends runs the unit on postgres and
// redis, and TestSecondAndDayOnSharedBackends the second and the day there,
// on the real clock (the backends keep their own).

// startOnClock starts a server on driver whose time is clock, with cfg
// changed by change.
func startOnClock(t *testing.T, driver string, clock *clocktest.Clock, change func(*config.Config)) *server {
	t.Helper()
	mx := smtptest.Start(t)
	cfg := baseConfig(t, driver, mx)
	change(&cfg)
	return &server{Server: apptest.StartWith(t, cfg, apptest.Options{Clock: clock}), SMTP: mx, cfg: cfg}
}

// sendTo posts a message from inbox to to, cc and bcc.
func (s *server) sendTo(t testing.TB, inbox string, to, cc, bcc []string, headers ...string) response {
	t.Helper()
	return s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": to, "cc": cc, "bcc": bcc,
		"subject": "Hello", "body": "Hi"}, headers...)
}

// relayRecipients counts the envelope recipients the relay has received.
func relayRecipients(mx *smtptest.Server) int {
	n := 0
	for _, m := range mx.Messages() {
		n += len(m.To)
	}
	return n
}

// TestRecipientsAsTheUnit: at 10 recipients a minute, three sends of 3
// are admitted, the fourth is refused with a Retry-After at which it is
// admitted, and the relay never has more than 10 recipients within any
// 60 s. A recipient named twice (to and bcc, in another case) counts once.
func TestRecipientsAsTheUnit(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		clock := clocktest.New(time.Now().UTC())
		s := startOnClock(t, driver, clock, func(c *config.Config) {
			c.ThrottleUnit, c.SendRateLimitPerMinute = "recipient", 10
		})
		a := s.createInbox(t, "a")
		// at: the relay's count of recipients after each step, with the
		// server's time then, for the sliding-window check at the end.
		type step struct {
			at         time.Time
			recipients int
		}
		var steps []step
		for i := range 3 {
			r := s.sendTo(t, a, []string{fmt.Sprintf("to%d@customer.test", i)}, []string{fmt.Sprintf("cc%d@customer.test", i)},
				[]string{fmt.Sprintf("TO%d@Customer.test", i), fmt.Sprintf("bcc%d@customer.test", i)})
			mustStatus(t, r, http.StatusCreated)
			if got := r.Header.Get("X-RateLimit-Unit"); got != "recipient" {
				t.Fatalf("X-RateLimit-Unit = %q, want recipient", got)
			}
			if got, want := r.Header.Get("X-RateLimit-Remaining"), strconv.Itoa(10-3*(i+1)); got != want {
				t.Fatalf("after send %d: X-RateLimit-Remaining = %s, want %s (3 recipients each; TO%d@Customer.test is to%d's)", i+1, got, want, i, i)
			}
			steps = append(steps, step{clock.Now(), relayRecipients(s.SMTP)})
			clock.Advance(5 * time.Second)
		}
		r := s.sendTo(t, a, []string{"x@customer.test", "y@customer.test", "z@customer.test"}, nil, nil)
		mustStatus(t, r, http.StatusTooManyRequests)
		body := r.JSON(t)
		if body["code"] != "rate_limited" || fmt.Sprint(body["violated"]) != "[per-minute]" {
			t.Fatalf("refusal = %s, want rate_limited by per-minute", r.Body)
		}
		if !strings.Contains(body["detail"].(string), "needs 3") {
			t.Errorf("detail %q does not say the send needs 3", body["detail"])
		}
		if got := r.Header.Get("X-RateLimit-Remaining"); got != "1" {
			t.Errorf("refusal's X-RateLimit-Remaining = %s, want 1 (one unit left, too few for 3)", got)
		}
		retry, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || retry < 1 {
			t.Fatalf("Retry-After = %q", r.Header.Get("Retry-After"))
		}
		// The first send's 3 leave at about 61 s after it, 15 s ago: the
		// Retry-After is when all 3 fit, not when the first unit frees.
		if retry < 45 || retry > 47 {
			t.Errorf("Retry-After = %d s, want about 46 (the first send's bucket leaving)", retry)
		}
		if n := relayRecipients(s.SMTP); n != 9 {
			t.Fatalf("relay has %d recipients, want 9", n)
		}
		clock.Advance(time.Duration(retry-1) * time.Second)
		mustStatus(t, s.sendTo(t, a, []string{"x@customer.test", "y@customer.test", "z@customer.test"}, nil, nil),
			http.StatusTooManyRequests)
		clock.Advance(time.Second)
		mustStatus(t, s.sendTo(t, a, []string{"x@customer.test", "y@customer.test", "z@customer.test"}, nil, nil),
			http.StatusCreated)
		steps = append(steps, step{clock.Now(), relayRecipients(s.SMTP)})
		if n := relayRecipients(s.SMTP); n != 12 {
			t.Fatalf("relay has %d recipients, want 12", n)
		}
		// Within any 60 s of the server's time, at most 10 reached the
		// relay: each step added what arrived since the one before.
		for i := range steps {
			sum := 0
			for j := i; j < len(steps) && steps[j].at.Sub(steps[i].at) < time.Minute; j++ {
				prev := 0
				if j > 0 {
					prev = steps[j-1].recipients
				}
				sum += steps[j].recipients - prev
			}
			if sum > 10 {
				t.Fatalf("%d recipients within 60 s from step %d, limit 10", sum, i)
			}
		}
		rl := s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)
		if rl["unit"] != "recipient" {
			t.Errorf("/v1/rate-limit unit = %v, want recipient", rl["unit"])
		}
		if w := rl["per_minute"].(map[string]any); w["used"] != float64(9) || w["limit"] != float64(10) {
			t.Errorf("/v1/rate-limit per_minute = %v, want used 9 of 10 (the first send left, 3 new)", w)
		}
	})
}

// TestTooManyRecipients: a send of more recipients than a window's limit
// could never be admitted: 422 too_many_recipients naming the window and
// its limit, nothing sent, nothing taken, and an Idempotency-Key left
// free; a scheduled one is refused when it is asked for, not failed
// later.
func TestTooManyRecipients(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) {
			c.ThrottleUnit, c.SendRateLimitPerMinute, c.InboxSendRateLimitPerHour = "recipient", 10, 50
		})
		a := s.createInbox(t, "a")
		eleven := make([]string, 11)
		for i := range eleven {
			eleven[i] = fmt.Sprintf("r%d@customer.test", i)
		}
		r := s.sendTo(t, a, eleven[:5], eleven[5:8], eleven[8:], "Idempotency-Key", "k-11")
		mustStatus(t, r, http.StatusUnprocessableEntity)
		body := r.JSON(t)
		detail, _ := body["detail"].(string)
		if body["code"] != "too_many_recipients" || fmt.Sprint(body["violated"]) != "[per-minute]" ||
			body["limit"] != float64(10) || body["recipients"] != float64(11) ||
			!strings.Contains(detail, "11 recipients") || !strings.Contains(detail, "per-minute limit of 10") {
			t.Fatalf("answer = %s, want too_many_recipients naming per-minute and 10", r.Body)
		}
		if r.Header.Get("Retry-After") != "" {
			t.Errorf("Retry-After %q on a refusal no wait would lift", r.Header.Get("Retry-After"))
		}
		r = s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": a, "to": eleven, "subject": "Later", "body": "Hi",
			"scheduled_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)})
		mustStatus(t, r, http.StatusUnprocessableEntity)
		if r.JSON(t)["code"] != "too_many_recipients" {
			t.Fatalf("scheduled: %s, want too_many_recipients", r.Body)
		}
		if n := s.SMTP.Count(); n != 0 {
			t.Fatalf("relay got %d messages, want 0", n)
		}
		rl := s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)["per_minute"].(map[string]any)
		if rl["used"] != float64(0) || rl["in_flight"] != float64(0) {
			t.Fatalf("per_minute after the refusals = %v, want nothing taken", rl)
		}
		// The key was not spent on the refusal: the same key with a send
		// that fits is a fresh send.
		mustStatus(t, s.sendTo(t, a, eleven[:10], nil, nil, "Idempotency-Key", "k-11"), http.StatusCreated)
	})
}

// TestPerSecondWindow: at 5 recipients a second, 200 concurrent sends of
// one recipient each: 5 are admitted, the rest refused; once the second
// has passed, 5 more. The relay's receipt times never show more than 5
// within any 1 s. On the real clock: the relay's times are real.
func TestPerSecondWindow(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) {
			c.ThrottleUnit, c.SendRateLimitPerSecond = "recipient", 5
		})
		a := s.createInbox(t, "a")
		fiveASecond(t, s.SMTP, a, s)
	})
}

// fiveASecond sends two waves of 200 concurrent one-recipient sends from
// inbox a, spread over servers, at a limit of 5 a second: each admits
// exactly 5, and the relay's receipt times never show 6 within 1 s. The
// relay holds each wave's admitted sends until the other 195 are answered:
// in flight, they fill the second however long the servers under -race
// take to answer 200 requests (on the real clock, a wave that outlasts the
// second may rightly admit more: 9 did, unheld). Between the waves it
// waits, on the real clock, until every server reads the window empty.
func fiveASecond(t *testing.T, mx *smtptest.Server, a string, servers ...*server) {
	t.Helper()
	wave := func() (admitted int) {
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			refused int
		)
		hold := mx.HoldAt(smtptest.BeforeReply)
		defer hold.Release()
		for i := range 200 {
			wg.Go(func() {
				r := servers[i%len(servers)].send(t, a, fmt.Sprintf("r%d@customer.test", i))
				mu.Lock()
				defer mu.Unlock()
				switch r.Status {
				case http.StatusCreated:
					admitted++
				case http.StatusTooManyRequests:
					refused++
					if v := r.JSON(t)["violated"]; fmt.Sprint(v) != "[per-second]" {
						t.Errorf("refused by %v, want [per-second]", v)
					}
				default:
					t.Errorf("status %d: %s", r.Status, r.Body)
				}
			})
		}
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			mu.Lock()
			answered := refused + admitted
			mu.Unlock()
			if answered >= 195 {
				break
			}
		}
		hold.Release()
		wg.Wait()
		return admitted
	}
	if n := wave(); n != 5 {
		t.Fatalf("first wave: %d admitted, want 5", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, s := range servers {
		for {
			w := s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)["per_second"].(map[string]any)
			if w["used"] == float64(0) && w["in_flight"] == float64(0) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("per_second still %v after 10 s", w)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if n := wave(); n != 5 {
		t.Fatalf("second wave: %d admitted, want 5", n)
	}
	msgs := mx.Messages()
	if len(msgs) != 10 {
		t.Fatalf("relay got %d messages, want 10", len(msgs))
	}
	times := make([]time.Time, len(msgs))
	for i, m := range msgs {
		times[i] = m.Received
	}
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for i := range times {
		if i+5 < len(times) && times[i+5].Sub(times[i]) < time.Second {
			t.Fatalf("6 messages within %v at the relay (from %v), limit 5 a second", times[i+5].Sub(times[i]), times[i])
		}
	}
}

// TestPerDayWindow: at 20 recipients a day, the day counts across hours
// on a fake clock, survives restarts with each send's weight (send_log's
// cost), and frees 24 h (and one 15 min bucket) after. The hours pass
// while no server runs: a running server's janitor ticks every second of
// them on the fake clock (68,400 statements for 19 h, 200 s under -race
// on SQLite), and each start restores the windows from the send log.
func TestPerDayWindow(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		clock := clocktest.New(time.Now().UTC())
		mx := smtptest.Start(t)
		cfg := baseConfig(t, driver, mx)
		cfg.ThrottleUnit, cfg.SendRateLimitPerDay, cfg.SendRateLimitPerHour = "recipient", 20, 15
		var s *server
		restartAfter := func(d time.Duration) {
			if s != nil {
				s.Stop()
			}
			clock.Advance(d)
			s = &server{Server: apptest.StartWith(t, cfg, apptest.Options{Clock: clock}), SMTP: mx, cfg: cfg}
		}
		restartAfter(0)
		a := s.createInbox(t, "a")
		ten := make([]string, 10)
		for i := range ten {
			ten[i] = fmt.Sprintf("r%d@customer.test", i)
		}
		mustStatus(t, s.sendTo(t, a, ten, nil, nil), http.StatusCreated)
		restartAfter(2 * time.Hour)
		mustStatus(t, s.sendTo(t, a, ten, nil, nil), http.StatusCreated) // 20 in the day, 10 in this hour
		restartAfter(3 * time.Hour)
		r := s.send(t, a, "late@customer.test")
		mustStatus(t, r, http.StatusTooManyRequests)
		if v := fmt.Sprint(r.JSON(t)["violated"]); v != "[per-day]" {
			t.Fatalf("after the restart: refused by %s, want [per-day]; %s", v, r.Body)
		}
		retry, _ := strconv.Atoi(r.Header.Get("Retry-After"))
		// The first 10 leave 24 h after the end of their 15 min bucket,
		// which began at most 15 min before them: 19 h to 19 h 15 min on.
		if lo, hi := 19*3600, 19*3600+15*60+1; retry < lo || retry > hi {
			t.Fatalf("Retry-After = %d s, want in [%d, %d]", retry, lo, hi)
		}
		if p := r.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"per-day";q=20;w=86400`) {
			t.Errorf("RateLimit-Policy = %q, want the day window in it", p)
		}
		restartAfter(time.Duration(retry-60) * time.Second)
		mustStatus(t, s.send(t, a, "late@customer.test"), http.StatusTooManyRequests)
		restartAfter(time.Minute)
		mustStatus(t, s.sendTo(t, a, ten, nil, nil), http.StatusCreated)
		w := s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)["per_day"].(map[string]any)
		if w["used"] != float64(20) || w["limit"] != float64(20) {
			t.Fatalf("per_day = %v, want used 20 of 20", w)
		}
	})
}

// TestInboxPerDayOverride: PATCH sets an inbox's own day, which its
// rate-limit shows and its sends meet.
func TestInboxPerDayOverride(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startDefault(t, driver, func(c *config.Config) { c.InboxSendRateLimitPerDay = 100 })
		a := s.createInbox(t, "a")
		if w := s.inboxWindow(t, a, "per_day"); w["limit"] != float64(100) {
			t.Fatalf("inbox per_day limit = %v, want the default 100", w["limit"])
		}
		r := s.do(t, "PATCH", "/v1/inboxes/"+a, map[string]any{"rate_limit": map[string]any{"per_day": 1}})
		mustStatus(t, r, http.StatusOK)
		if rl := fmt.Sprint(r.JSON(t)["rate_limit"]); rl != "map[per_day:1 per_hour:<nil> per_minute:<nil>]" {
			t.Fatalf("rate_limit = %s", rl)
		}
		mustStatus(t, s.send(t, a, "x@customer.test"), http.StatusCreated)
		r = s.send(t, a, "x@customer.test")
		mustStatus(t, r, http.StatusTooManyRequests)
		if v := fmt.Sprint(r.JSON(t)["violated"]); v != "[inbox-per-day]" {
			t.Fatalf("refused by %s, want [inbox-per-day]", v)
		}
		if r := s.do(t, "GET", "/v1/inboxes/"+a+"/rate-limit", nil).JSON(t); r["per_second"] != nil || r["unit"] != "message" {
			t.Errorf("inbox rate-limit = %v, want no per_second and unit message", r)
		}
	})
}

// TestSESLimitsFromAccount: with SES_LIMITS_FROM_ACCOUNT the server starts
// with SES's quota (times 0.9) as its per-second and per-day windows, and
// an hour later, on a fake clock, applies a changed quota.
func TestSESLimitsFromAccount(t *testing.T) {
	t.Parallel()
	f := providertest.Start(t, "ses")
	clock := clocktest.New(time.Now().UTC())
	cfg := hostedConfig(t, "sqlite", "ses", f)
	cfg.SESLimitsFromAccount, cfg.ThrottleUnit = true, "recipient"
	s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{Clock: clock}), cfg: cfg}
	limits := func() (perSecond, perDay any) {
		rl := s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)
		return rl["per_second"].(map[string]any)["limit"], rl["per_day"].(map[string]any)["limit"]
	}
	if ps, pd := limits(); ps != float64(12) || pd != float64(45000) {
		t.Fatalf("limits at start = %v/s, %v/day, want 12 and 45000 (14 and 50000 × 0.9)", ps, pd)
	}
	f.SetSESQuota(providertest.SESQuota{MaxSendRate: 20, Max24HourSend: 100000, SentLast24Hours: 10})
	clock.Advance(time.Hour)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ps, pd := limits()
		if ps == float64(18) && pd == float64(90000) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("limits an hour later = %v/s, %v/day, want 18 and 90000", ps, pd)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRecipientsOnSharedBackends: the shared backends count recipients
// too, all or none, across two servers: 3 + 3 + 3 are admitted, a fourth
// send of 3 is refused with a Retry-After (the backend keeps its own
// clock, so the test does not wait for it), one of 1 is admitted, 11 is
// 422; the relay has 10 recipients.
func TestRecipientsOnSharedBackends(t *testing.T) {
	t.Parallel()
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			mx := smtptest.Start(t)
			cfg := baseConfig(t, "postgres", mx)
			cfg.ThrottleBackend, cfg.ThrottleUnit, cfg.SendRateLimitPerMinute = backend, "recipient", 10
			cfg.RedisURL, cfg.RedisKeyPrefix = redistest.URL(), redistest.Prefix(t)
			one := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
			two := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
			a := one.createInbox(t, "a")
			first := time.Now() // the first send is admitted after this
			for i, s := range []*server{one, two, one} {
				mustStatus(t, s.sendTo(t, a, []string{fmt.Sprintf("to%d@customer.test", i)},
					[]string{fmt.Sprintf("cc%d@customer.test", i)}, []string{fmt.Sprintf("bcc%d@customer.test", i)}), http.StatusCreated)
			}
			r := two.sendTo(t, a, []string{"x@customer.test", "y@customer.test", "z@customer.test"}, nil, nil)
			mustStatus(t, r, http.StatusTooManyRequests)
			// The first send leaves the minute about 60 s after it was
			// admitted (its 1 s bucket's start), which was at most elapsed
			// ago: beside a second make test the four sends took 8 s, and
			// 52 was right.
			elapsed := int(time.Since(first)/time.Second) + 1
			if retry, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || retry < 59-elapsed || retry > 62 {
				t.Errorf("Retry-After = %q, want 59 s less the %d s since the first send, to 62 (the first send leaving)",
					r.Header.Get("Retry-After"), elapsed)
			}
			if r.Header.Get("X-RateLimit-Unit") != "recipient" {
				t.Errorf("X-RateLimit-Unit = %q", r.Header.Get("X-RateLimit-Unit"))
			}
			mustStatus(t, one.send(t, a, "last@customer.test"), http.StatusCreated)
			mustStatus(t, two.send(t, a, "over@customer.test"), http.StatusTooManyRequests)
			eleven := make([]string, 11)
			for i := range eleven {
				eleven[i] = fmt.Sprintf("r%d@customer.test", i)
			}
			r = one.sendTo(t, a, eleven, nil, nil)
			mustStatus(t, r, http.StatusUnprocessableEntity)
			if r.JSON(t)["code"] != "too_many_recipients" {
				t.Fatalf("11 recipients: %s", r.Body)
			}
			if n := relayRecipients(mx); n != 10 {
				t.Fatalf("relay has %d recipients, want 10", n)
			}
		})
	}
}

// TestSecondAndDayConfigOnSharedBackend: the shared backends keep the
// second and the day, so the configuration takes the three variables with
// THROTTLE_BACKEND=redis or postgres; it still refuses
// SES_LIMITS_FROM_ACCOUNT there, naming it: each server re-reading SES's
// quota on its own would change limits the servers must agree on.
func TestSecondAndDayConfigOnSharedBackend(t *testing.T) {
	t.Parallel()
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			cfg := apptest.Config(t, "postgres")
			cfg.ThrottleBackend, cfg.RedisURL = backend, "redis://127.0.0.1:6379/0"
			cfg.ThrottleUnit, cfg.SendRateLimitPerSecond, cfg.SendRateLimitPerDay, cfg.InboxSendRateLimitPerDay = "recipient", 1, 1, 1
			if err := cfg.Validate(); err != nil {
				t.Fatalf("Validate() = %v, want the second and the day taken on %s", err, backend)
			}
			cfg.EmailProvider, cfg.SESLimitsFromAccount = "ses", true
			err := cfg.Validate()
			if err == nil || !strings.Contains(err.Error(), "SES_LIMITS_FROM_ACCOUNT: is for THROTTLE_BACKEND=memory only") {
				t.Fatalf("Validate() = %v, want SES_LIMITS_FROM_ACCOUNT refused on %s", err, backend)
			}
			for _, v := range []string{"GLOBAL_SEND_RATE_LIMIT_PER_SECOND", "GLOBAL_SEND_RATE_LIMIT_PER_DAY", "INBOX_SEND_RATE_LIMIT_PER_DAY"} {
				if strings.Contains(err.Error(), v) {
					t.Errorf("Validate() = %v: %s is kept by every backend", err, v)
				}
			}
		})
	}
}

// TestSecondAndDayOnSharedBackends: the second and the day hold across
// two servers sharing postgres or redis. At 5 recipients a second, 200
// concurrent sends of one recipient, split across both servers, admit
// exactly 5, twice (once the second has passed), and the relay's receipt
// times never show 6 within 1 s. At 3 a day, the fourth send is refused
// by the day alone, with a Retry-After of about a day; an inbox's per_day
// is taken by PATCH and met. On the real clock: the backends keep their
// own.
func TestSecondAndDayOnSharedBackends(t *testing.T) {
	t.Parallel()
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			t.Run("second", func(t *testing.T) {
				t.Parallel()
				mx := smtptest.Start(t)
				cfg := baseConfig(t, "postgres", mx)
				cfg.ThrottleBackend, cfg.ThrottleUnit, cfg.SendRateLimitPerSecond = backend, "recipient", 5
				cfg.RedisURL, cfg.RedisKeyPrefix = redistest.URL(), redistest.Prefix(t)
				one := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
				two := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
				a := one.createInbox(t, "a")
				fiveASecond(t, mx, a, one, two)
			})
			t.Run("day", func(t *testing.T) {
				t.Parallel()
				mx := smtptest.Start(t)
				cfg := baseConfig(t, "postgres", mx)
				cfg.ThrottleBackend, cfg.ThrottleUnit, cfg.SendRateLimitPerDay = backend, "recipient", 3
				cfg.RedisURL, cfg.RedisKeyPrefix = redistest.URL(), redistest.Prefix(t)
				one := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
				two := &server{Server: apptest.Start(t, cfg), SMTP: mx, cfg: cfg}
				a, b := one.createInbox(t, "a"), one.createInbox(t, "b")
				r := one.do(t, "PATCH", "/v1/inboxes/"+b, map[string]any{"rate_limit": map[string]any{"per_day": 1}})
				mustStatus(t, r, http.StatusOK)
				mustStatus(t, two.send(t, b, "x@customer.test"), http.StatusCreated)
				r = one.send(t, b, "y@customer.test")
				mustStatus(t, r, http.StatusTooManyRequests)
				if v := fmt.Sprint(r.JSON(t)["violated"]); v != "[inbox-per-day]" {
					t.Fatalf("inbox b's second send: refused by %s, want [inbox-per-day]; %s", v, r.Body)
				}
				mustStatus(t, one.send(t, a, "p@customer.test"), http.StatusCreated)
				mustStatus(t, two.send(t, a, "q@customer.test"), http.StatusCreated)
				r = one.send(t, a, "r@customer.test")
				mustStatus(t, r, http.StatusTooManyRequests)
				if v := fmt.Sprint(r.JSON(t)["violated"]); v != "[per-day]" {
					t.Fatalf("the fourth send: refused by %s, want [per-day]; %s", v, r.Body)
				}
				// The first send leaves 24 h after the end of its 15 min
				// bucket: the day, not the hour, refused it.
				if retry, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || retry < 86400-60 || retry > 86400+15*60+1 {
					t.Errorf("Retry-After = %q, want about a day", r.Header.Get("Retry-After"))
				}
				if n := relayRecipients(mx); n != 3 {
					t.Fatalf("relay has %d recipients, want 3", n)
				}
			})
		})
	}
}
