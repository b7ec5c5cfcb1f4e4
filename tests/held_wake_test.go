package tests

import (
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// A lane refused while the sends that fill its window are still in flight
// wakes when room appears, not at the pessimistic Retry-After that assumes
// each of them commits at the end of its lease. The exact moment is
// skuld.TestHeldWait's, on a fake clock; here, with the real server and
// relay, the queued send goes out never before room appears, and closer to
// it than to the Retry-After a client was told beside it. How soon after
// room appears is a latency, logged, not asserted.
func TestQueuedLaneWakesWhenRoomAppears(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startHeld(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 3 })
		inbox := s.createInbox(t, "wake")
		// Three sends fill the minute window and stay in flight for 20 s:
		// the relay stores each at once and answers 20 s later.
		const flight = 20 * time.Second
		s.SMTP.DelayDataReply(flight)
		answered := make([]time.Time, 3)
		var wg sync.WaitGroup
		for i := range answered {
			wg.Go(func() {
				r := s.send(t, inbox, fmt.Sprintf("direct%d@example.com", i))
				answered[i] = time.Now()
				if r.Status != http.StatusCreated {
					t.Errorf("direct send %d: status %d, body %s", i, r.Status, r.Body)
				}
			})
		}
		s.SMTP.WaitForCount(t, 3)
		s.SMTP.DelayDataReply(0)
		r := s.queue(t, inbox, "queued@example.com")
		mustStatus(t, r, http.StatusAccepted)
		if st := r.JSON(t)["status"]; st != "queued" {
			t.Fatalf("queued send answered %s", r.Body)
		}
		retryAfter := retryAfterBeside(t, s, inbox)
		told := time.Now().Add(time.Duration(retryAfter) * time.Second)
		wg.Wait()
		var received []time.Time
		for _, m := range s.SMTP.Messages() {
			received = append(received, m.Received)
		}
		// A send counts from its commit, after the relay stored it and
		// before the API's answer; it leaves the minute window with its 1 s
		// bucket, 60 to 61 s later. The first to leave makes room.
		earliest, latest := received[0], answered[0]
		for i := range 3 {
			earliest, latest = minTime(earliest, received[i]), minTime(latest, answered[i])
		}
		roomFrom, roomBy := earliest.Add(time.Minute), latest.Add(time.Minute+time.Second)
		waitFor(t, time.Until(told), func() bool { return s.SMTP.Count() == 4 })
		got := s.SMTP.Messages()[3].Received
		t.Logf("the relay stored the direct sends from %v and the API answered from %v; the queued send came %v after the API's first answer",
			earliest.Format("15:04:05.000"), latest.Format("15:04:05.000"), got.Sub(latest).Round(time.Millisecond))
		t.Logf("queued send received %v after the latest moment room may have appeared", got.Sub(roomBy).Round(time.Millisecond))
		if got.Before(roomFrom) {
			t.Errorf("queued send received %v before its window had room", roomFrom.Sub(got))
		}
		t.Logf("a client beside it was told to retry %v after room appeared", told.Sub(roomBy).Round(time.Second))
		if late, bound := got.Sub(roomBy), told.Sub(roomBy)/2; late >= bound {
			t.Errorf("queued send received %v after its window had room, want sooner than %v (half the way to the Retry-After of %d s)", late, bound, retryAfter)
		}
	})
}

// A lane refused while a send in flight fills its window wakes soon after
// that send fails and gives its slot back: room may appear at any moment,
// so the lane asks again every half second (skuld.TestHeldWait holds that
// to the millisecond on a fake clock), not at the Retry-After a client is
// told, which assumes the send commits at the end of its lease. Here, with
// the real server and relay, the queued send must go out sooner than half
// that Retry-After: a lane that waited it out fails by tens of seconds. How
// soon is a latency, logged, not asserted: at load 20 (two make test side
// by side) it took 1.169 s against a bound of 1 s.
func TestQueuedLaneWakesWhenAFlightFails(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		s := startHeld(t, driver, func(c *config.Config) { c.SendRateLimitPerMinute = 1 })
		inbox := s.createInbox(t, "fail")
		// The direct send waits in the relay until released, then is
		// refused for good: its slot is given back.
		hold := s.SMTP.HoldAt(smtptest.InContent)
		s.SMTP.RejectDataTimes(1, 550, [3]int{5, 7, 1}, "rejected by policy")
		var answered time.Time
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.send(t, inbox, "doomed@example.com")
			answered = time.Now()
		}()
		<-hold.Reached()
		r := s.queue(t, inbox, "queued@example.com")
		mustStatus(t, r, http.StatusAccepted)
		id := r.JSON(t)["id"].(string)
		// What a client is told meanwhile: the lane must not wait that long.
		retryAfter := retryAfterBeside(t, s, inbox)
		// Release the flight just after the lane has asked the throttle
		// (each refusal writes the message's next attempt): it learns of
		// the room only when it asks again.
		next := func() any { return s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)["next_attempt_at"] }
		first := next()
		waitFor(t, 20*time.Second, func() bool { return next() != first })
		hold.Release()
		<-done
		waitFor(t, 20*time.Second, func() bool { return s.SMTP.Count() == 1 })
		got := s.SMTP.Messages()[0]
		if got.To[0] != "queued@example.com" {
			t.Fatalf("the relay stored %v, want the queued send", got.To)
		}
		// The slot was given back before the direct send's answer.
		late := got.Received.Sub(answered)
		t.Logf("queued send received %v after the failed send's slot was given back (a client was told Retry-After %d s)", late.Round(time.Millisecond), retryAfter)
		if bound := time.Duration(retryAfter) * time.Second / 2; late >= bound {
			t.Errorf("queued send received %v after its window had room, want sooner than %v (half the Retry-After of %d s)", late, bound, retryAfter)
		}
	})
}

// retryAfterBeside is the Retry-After, in seconds, that a direct send to
// inbox is told now, while sends in flight fill its window: the wait a
// queued lane must beat. It is at least the minute, since the window's
// sends are counted from their commits, at the end of their leases.
func retryAfterBeside(t *testing.T, s *server, inbox string) int {
	t.Helper()
	probe := s.send(t, inbox, "probe@example.com")
	mustStatus(t, probe, http.StatusTooManyRequests)
	retryAfter, err := strconv.Atoi(probe.Header.Get("Retry-After"))
	if err != nil || retryAfter < 60 {
		t.Fatalf("a direct send beside the flights: Retry-After %q, want the minute and the lease", probe.Header.Get("Retry-After"))
	}
	return retryAfter
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
