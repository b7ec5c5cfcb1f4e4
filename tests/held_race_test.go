package tests

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// A 200 always wins (issue 26): a reschedule or a cancel that the API
// answered 200 means nothing goes out at the old time, and a 409 means the
// message was sent, exactly once, even when they race the dispatch.

// raceMessages is how many messages each round races, at once, each to
// its own recipient: the more dispatches in flight, the likelier a change
// lands between a dispatch's read and its claim.
const raceMessages = 5

// waitAttachment is read between a dispatch's read and its claim, which it
// widens; it was 2 MB, and is a quarter of that: what keeps the gap open
// now is the wait for the one SMTP connection (TestHeldChangeRacingDispatch).
// SQLite, whose one database connection serializes the dispatches' reads
// with the changes, still needs some of the reading.
var waitAttachment = file{name: "half.bin", contentType: "application/octet-stream",
	content: bytes.Repeat([]byte("0123456789abcdef"), 512<<10/16)}

// raceRound is one round of the race: raceMessages scheduled for the same
// time, each hit with 30 changes (change names one: "reschedule" or
// "cancel"), one every 10 ms from about 150 ms before its time, and each
// message's answers.
type raceRound struct {
	s      *server
	change string
	ids    []string
	to     []string
	codes  [][]int
	at     time.Time // when they are due
	later  time.Time // the reschedule's new time
}

// newRaceRound schedules the round's messages, an hour ahead: accepting
// 2 MB takes a while on a busy machine; schedule moves them to their time.
func newRaceRound(t *testing.T, s *server, inbox, change string, round int) *raceRound {
	t.Helper()
	rr := &raceRound{s: s, change: change, codes: make([][]int, raceMessages)}
	for i := range raceMessages {
		to := fmt.Sprintf("%s%d-%d@example.com", change, round, i)
		r := s.sendAt(t, inbox, to, time.Now().Add(time.Hour), "attachments", []map[string]any{waitAttachment.json()})
		mustStatus(t, r, http.StatusAccepted)
		rr.ids, rr.to = append(rr.ids, r.JSON(t)["id"].(string)), append(rr.to, to)
	}
	return rr
}

// schedule moves the round's messages to at.
func (rr *raceRound) schedule(t *testing.T, at time.Time) {
	t.Helper()
	rr.at, rr.later = at, at.Add(24*time.Hour).UTC().Truncate(time.Millisecond)
	for _, id := range rr.ids {
		moveTo(t, rr.s, id, at)
	}
}

// race sends the changes, and records the answers. A change that lands
// before the dispatch reads the message wins without a race, so the
// messages' changes start at staggered offsets from their time (shift
// moves them all), to catch the read and the claim in between.
func (rr *raceRound) race(t *testing.T, shift time.Duration) {
	s, change := rr.s, rr.change
	start := rr.at.Add(-150 * time.Millisecond)
	time.Sleep(time.Until(start))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i, id := range rr.ids {
		offset := shift + time.Duration(i)*80*time.Millisecond
		for k := range 30 {
			wg.Go(func() {
				time.Sleep(time.Until(start.Add(offset + time.Duration(k)*10*time.Millisecond)))
				var r response
				if change == "cancel" {
					r = s.do(t, "POST", "/v1/messages/"+id+"/cancel", nil)
				} else {
					r = s.do(t, "PATCH", "/v1/messages/"+id, map[string]any{"scheduled_at": rr.later.Format(time.RFC3339Nano)})
				}
				mu.Lock()
				rr.codes[i] = append(rr.codes[i], r.Status)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
}

// check waits for every dispatch under way to be recorded, then holds each
// message to the answers it was given.
func (rr *raceRound) check(t *testing.T) {
	t.Helper()
	s := rr.s
	waitFor(t, 20*time.Second, func() bool {
		for _, id := range rr.ids {
			if st := s.status(t, id); st == "sending" || st == "queued" {
				return false
			}
		}
		return true
	})
	// A dispatch that read the message before the change and claims it
	// after would have done so within a moment of its time.
	time.Sleep(time.Second)
	delivered := map[string]int{}
	for _, m := range s.SMTP.Messages() {
		delivered[m.To[0]]++
	}
	for i, id := range rr.ids {
		m := s.do(t, "GET", "/v1/messages/"+id, nil).JSON(t)
		ok, conflict := 0, 0
		for _, c := range rr.codes[i] {
			switch c {
			case http.StatusOK:
				ok++
			case http.StatusConflict:
				conflict++
			default:
				t.Errorf("%s of message %d answered %d", rr.change, i, c)
			}
		}
		if ok > 0 {
			want := "scheduled"
			if rr.change == "cancel" {
				want = "canceled"
			}
			bad := delivered[rr.to[i]] != 0 || m["status"] != want || m["sent_at"] != nil
			if rr.change == "reschedule" {
				at, _ := m["scheduled_at"].(string)
				got, err := time.Parse(time.RFC3339Nano, at)
				bad = bad || err != nil || !got.Equal(rr.later)
			}
			if bad {
				t.Errorf("message %d: %d %s(s) answered 200, yet delivered %d times; status %v, scheduled_at %v (want %v), sent_at %v",
					i, ok, rr.change, delivered[rr.to[i]], m["status"], m["scheduled_at"], rr.later.Format(time.RFC3339Nano), m["sent_at"])
			}
		}
		// A cancel answered 409 after one answered 200 found the message
		// canceled; a reschedule never does, it stays scheduled.
		if conflict > 0 && (ok == 0 || rr.change == "reschedule") && (delivered[rr.to[i]] != 1 || m["status"] != "sent") {
			t.Errorf("message %d: %d %s(s) answered 409, yet delivered %d times, status %v", i, conflict, rr.change,
				delivered[rr.to[i]], m["status"])
		}
	}
}

func TestHeldChangeRacingDispatch(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		// Each 2 MB send to the relay must outlast a busy machine (make
		// test): with the base SMTP_TIMEOUT of 15 s, sends whose
		// reschedule answered 409 ended failed, timed out, not sent.
		// The round's ten messages, due at once, share one SMTP
		// connection that answers each after 100 ms: the dispatches that
		// read their message wait in turn for the connection, up to a
		// second, before they claim it. Changes land in that gap as they
		// would behind a busy relay, with less work for the machine than
		// 2 MB attachments gave it (about 70 s of CPU under -race).
		s := startHeld(t, driver, func(c *config.Config) {
			c.SMTPTimeout, c.SendTimeout, c.SMTPMaxConnections = 5*time.Minute, 5*time.Minute, 1
		})
		s.SMTP.DelayDataReply(100 * time.Millisecond)
		inbox := s.createInbox(t, "racer")
		tally := map[string]map[int]int{"reschedule": {}, "cancel": {}}
		for round := range 2 {
			// Both changes race dispatches due at the same time, each on
			// messages of its own.
			rounds := []*raceRound{newRaceRound(t, s, inbox, "reschedule", round),
				newRaceRound(t, s, inbox, "cancel", round)}
			at := time.Now().Add(1500 * time.Millisecond)
			for _, rr := range rounds {
				rr.schedule(t, at)
			}
			var wg sync.WaitGroup
			for _, rr := range rounds {
				wg.Go(func() { rr.race(t, time.Duration(round)*40*time.Millisecond) })
			}
			wg.Wait()
			for _, rr := range rounds {
				rr.check(t)
				for _, cs := range rr.codes {
					for _, c := range cs {
						tally[rr.change][c]++
					}
				}
			}
		}
		t.Logf("answers: %v", tally)
	})
}

// A queued message rescheduled while its lane is sending: a PATCH answered
// 200 means it does not go out at its old place in the lane; a 409, that
// it went out once.
func TestQueuedChangeRacingLane(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		const n = 7
		// The direct sends stay at the relay while the queued ones are
		// accepted (2 MB each took about 2.3 s apiece under -race on
		// SQLite, and eight under make test's load; 512 KiB a quarter of
		// that), so the SMTP timeout and each
		// attempt's deadline must outlast that, not cut them off (15 s in
		// the base configuration, and then the one-minute attempt deadline
		// under load: they then counted, and the window stayed full for a
		// minute).
		s := startHeld(t, driver, func(c *config.Config) {
			c.SendRateLimitPerMinute, c.SMTPMaxConnections = n, n+1
			c.SMTPTimeout, c.SendTimeout = 5*time.Minute, 5*time.Minute
		})
		inbox := s.createInbox(t, "lane")
		// n direct sends fill the window, in flight at the relay, and are
		// then refused for good, giving their slots back at once.
		hold := s.SMTP.HoldAt(smtptest.InContent)
		s.SMTP.RejectDataTimes(n, 550, [3]int{5, 7, 1}, "rejected by policy")
		var direct sync.WaitGroup
		for i := range n {
			direct.Go(func() { s.send(t, inbox, fmt.Sprintf("doomed%d@example.com", i)) })
		}
		waitFor(t, 10*time.Second, func() bool {
			return s.do(t, "GET", "/v1/rate-limit", nil).JSON(t)["per_minute"].(map[string]any)["in_flight"] == float64(n)
		})
		rr := &raceRound{s: s, change: "reschedule", codes: make([][]int, n),
			later: time.Now().Add(24 * time.Hour).UTC().Truncate(time.Millisecond)}
		for i := range n {
			to := fmt.Sprintf("queued%d@example.com", i)
			r := s.do(t, "POST", "/v1/messages", map[string]any{"inbox_id": inbox, "to": []string{to}, "subject": "Queued",
				"body": "Hi", "on_throttle": "queue", "attachments": []map[string]any{waitAttachment.json()}})
			mustStatus(t, r, http.StatusAccepted)
			rr.ids, rr.to = append(rr.ids, r.JSON(t)["id"].(string)), append(rr.to, to)
		}
		// Each queued message's dispatch reads it a relay's answer and a
		// record after the one before it was stored: its PATCHes start
		// around then, at offsets from 100 ms before the answer, as the
		// record's time varies. Every other one is raced; the lane goes on
		// to the next when a PATCH wins.
		const reply = 300 * time.Millisecond
		s.SMTP.DelayDataReply(reply)
		hold.Release()
		direct.Wait()
		var wg sync.WaitGroup
		var mu sync.Mutex
		for i := 1; i < n; i += 2 {
			var stored time.Time
			waitFor(t, 30*time.Second, func() bool {
				for _, m := range s.SMTP.Messages() {
					if m.To[0] == rr.to[i-1] {
						stored = m.Received
						return true
					}
				}
				return false
			})
			start := stored.Add(reply + 20*time.Millisecond + time.Duration(i/2)*25*time.Millisecond)
			for k := range 30 {
				wg.Go(func() {
					time.Sleep(time.Until(start.Add(time.Duration(k) * 10 * time.Millisecond)))
					r := s.do(t, "PATCH", "/v1/messages/"+rr.ids[i], map[string]any{"scheduled_at": rr.later.Format(time.RFC3339Nano)})
					mu.Lock()
					rr.codes[i] = append(rr.codes[i], r.Status)
					mu.Unlock()
				})
			}
		}
		wg.Wait()
		rr.check(t)
		t.Logf("answers: %v", rr.codes)
	})
}
