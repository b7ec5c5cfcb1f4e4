package tests

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/smtptest"
)

// Held mail whose job a killed server held (issue 26): another server, or
// the same one started again, sends it within app.HeldRescueBound, once
// River's rescuer has taken the dead server's job. Each server here has one
// SMTP connection, so at most one message is on the wire at the kill: that
// one may have reached the relay and reads "delivery unknown"; every other
// one is sent exactly once, none stays held.

// slowRelay is how long the relay takes to answer each message while a
// server sends held mail it is about to be killed with.
const slowRelay = 500 * time.Millisecond

// Two servers on one PostgreSQL database, with each shared throttle: the
// first alone fetches the jobs of 60 messages scheduled for one second and
// sends them to a slow relay; the second starts just after that second,
// while the first is alive, so it is not alone; then the first is killed.
func TestClusterCrashScheduledIsRescued(t *testing.T) {
	t.Parallel()
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			mx := smtptest.Start(t)
			env := clusterEnv(t, backend, mx, shortLeaseEnv(oneConnection)...)
			first := startProc(t, env)
			inbox := first.createInbox(t, "sched")
			mx.DelayDataReply(slowRelay)
			ids := scheduleMany(t, first, inbox, 60, time.Now().Add(8*time.Second))
			waitFor(t, 30*time.Second, func() bool { return mx.Count() >= 1 }) // the first fetched them
			second := startProc(t, env)
			waitFor(t, 30*time.Second, func() bool { return mx.Count() >= 3 })
			first.kill(t)
			killed := time.Now()
			mx.DelayDataReply(0)
			sentOnceEach(t, second, mx, inbox, ids, killed, 1)
		})
	}
}

// The same with an inbox's queued mail: the first server, alone, is the
// one whose lane job is sending when it is killed. The rest go out from
// the second, in the order they were accepted, never more than the limit
// in any minute.
func TestClusterCrashQueuedIsRescued(t *testing.T) {
	t.Parallel()
	const limit = 3
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			mx := smtptest.Start(t)
			env := clusterEnv(t, backend, mx, shortLeaseEnv(oneConnection)...)
			first := startProc(t, env)
			inbox := first.createInbox(t, "lane")
			mustStatus(t, first.do(t, "PATCH", "/v1/inboxes/"+inbox,
				map[string]any{"rate_limit": map[string]any{"per_minute": limit}}), http.StatusOK)
			for i := range limit {
				mustStatus(t, first.queue(t, inbox, fmt.Sprintf("now%d@example.com", i)), http.StatusCreated)
			}
			ids, order := map[string]string{}, map[string]int{}
			var next time.Time
			for i := range limit {
				to := fmt.Sprintf("q%d@example.com", i)
				r := first.queue(t, inbox, to)
				mustStatus(t, r, http.StatusAccepted)
				ids[to], order[to] = r.JSON(t)["id"].(string), i
				if i == 0 {
					next = parseTime(t, r.JSON(t)["next_attempt_at"])
				}
			}
			// The first server's lane hands q0 over and waits for the
			// relay's answer; q1 and q2 wait behind it.
			hold := mx.HoldAt(smtptest.BeforeReply)
			select {
			case <-hold.Reached():
			case <-time.After(time.Until(next) + rescueWait()):
				t.Fatalf("the lane sent nothing by %v after its next_attempt_at", rescueWait())
			}
			second := startProc(t, env)
			first.kill(t)
			killed := time.Now()
			hold.Release()

			got := sentOnceEach(t, second, mx, inbox, ids, killed, 1)
			var times []time.Time
			last := -1
			for _, m := range mx.Messages() {
				times = append(times, m.Received)
			}
			for _, m := range got {
				if order[m.To[0]] < last {
					t.Errorf("%s delivered after a message accepted later (deliveries %v)", m.To[0], recipients(got))
				}
				last = order[m.To[0]]
			}
			if most := maxInWindow(times, time.Minute); most > limit {
				t.Errorf("%d deliveries within 60 s, want at most %d", most, limit)
			}
		})
	}
}

// One server with a shared throttle, killed 0.3 s after the second its 30
// messages are scheduled for, while it sends them to a slow relay, and
// started again alone: they all go out, once, within the rescue bound of
// the restart.
func TestRestartAloneOnSharedBackendSendsHeld(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	env := clusterEnv(t, "postgres", mx, shortLeaseEnv(oneConnection)...)
	p := startProc(t, env)
	inbox := p.createInbox(t, "sched")
	mx.DelayDataReply(slowRelay)
	at := time.Now().Add(8 * time.Second).Truncate(time.Second)
	ids := scheduleMany(t, p, inbox, 30, at)
	time.Sleep(time.Until(at.Add(300 * time.Millisecond)))
	waitFor(t, 30*time.Second, func() bool { return mx.Count() >= 1 }) // it fetched them
	p.kill(t)
	t.Logf("killed with %d of 30 at the relay", mx.Count())
	mx.DelayDataReply(0)
	started := time.Now()
	p = startProc(t, env)
	sentOnceEach(t, p, mx, inbox, ids, started, 1)
}

// scheduleMany schedules n messages from inbox for the second of at, one to
// each of c0@example.com, c1@…, and returns their ids by recipient.
func scheduleMany(t *testing.T, s *proc, inbox string, n int, at time.Time) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for i := range n {
		to := fmt.Sprintf("c%d@example.com", i)
		r := s.sendAt(t, inbox, to, at.Truncate(time.Second))
		mustStatus(t, r, http.StatusAccepted)
		ids[to] = r.JSON(t)["id"].(string)
	}
	return ids
}

// sentOnceEach waits until rescueWait after since (a kill, or a restart)
// for every message of ids (recipient → id) to leave scheduled, queued and
// sending, as s lists inbox's messages, then checks that each reached mx
// exactly once and reads sent; all but at most onWire, those on the wire
// when a server was killed, which may have reached it once or not at all
// and read failed, "delivery unknown". It returns the deliveries to ids in
// the order mx received them.
func sentOnceEach(t *testing.T, s *proc, mx *smtptest.Server, inbox string, ids map[string]string, since time.Time, onWire int) []smtptest.Message {
	t.Helper()
	var byID map[string]map[string]any
	settled := waitUntil(time.Until(since.Add(rescueWait())), func() bool {
		byID = messagesByID(t, s, inbox)
		for _, id := range ids {
			switch byID[id]["status"] {
			case "scheduled", "queued", "sending":
				return false
			}
		}
		return true
	})
	counts := map[any]int{}
	for _, id := range ids {
		counts[byID[id]["status"]]++
	}
	if !settled {
		t.Errorf("%v later, of %d held messages: %v; want none scheduled, queued or sending",
			time.Since(since).Round(time.Second), len(ids), counts)
	}
	var got []smtptest.Message
	times := map[string]int{}
	for _, m := range mx.Messages() {
		if _, ok := ids[m.To[0]]; ok {
			got = append(got, m)
			times[m.To[0]]++
		}
	}
	unknown := 0
	for to, id := range ids {
		m := byID[id]
		switch n := times[to]; {
		case m["status"] == "sent" && n == 1:
		case m["status"] == "failed" && strings.Contains(fmt.Sprint(m["error"]), "delivery unknown") && n <= 1:
			unknown++
		default:
			t.Errorf("%s: %v (error %v), delivered %d times; want sent, once", to, m["status"], m["error"], n)
		}
	}
	if unknown > onWire {
		t.Errorf("%d messages failed with delivery unknown, want at most %d (those on the wire)", unknown, onWire)
	}
	if len(got) > 0 {
		t.Logf("%v: the last delivered %v later (the bound: %v)", counts,
			got[len(got)-1].Received.Sub(since).Round(time.Second), rescueWait()-rescueSlack)
	}
	return got
}

// messagesByID lists inbox's messages on s, by id.
func messagesByID(t *testing.T, s *proc, inbox string) map[string]map[string]any {
	t.Helper()
	r := s.do(t, "GET", "/v1/messages?inbox_id="+inbox+"&limit=500", nil)
	mustStatus(t, r, http.StatusOK)
	byID := map[string]map[string]any{}
	for _, it := range r.JSON(t)["items"].([]any) {
		m := it.(map[string]any)
		byID[m["id"].(string)] = m
	}
	return byID
}

// recipients lists the first recipient of each of ms.
func recipients(ms []smtptest.Message) []string {
	var to []string
	for _, m := range ms {
		to = append(to, m.To[0])
	}
	return to
}

// parseTime reads an RFC 3339 time from a JSON answer.
func parseTime(t *testing.T, v any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339Nano, fmt.Sprint(v))
	if err != nil {
		t.Fatalf("time %v: %v", v, err)
	}
	return at
}
