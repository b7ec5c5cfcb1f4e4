package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// lossBurst is a burst of sends by concurrent clients, each sending until
// the budget is spent. The first sends, up to gate, go at once; the others
// wait until those are answered 201 (and onCreated has seen so). A client
// refused waits until something changes (a send is answered 201, or the
// test wakes it) and tries again; once nothing is in flight and nothing
// changed, it stops: the burst is over.
type lossBurst struct {
	mu                             sync.Mutex
	changed                        *sync.Cond
	clients, next, budget, gate    int
	ok, outstanding, exited, epoch int
	waiting                        map[int]int // clients waiting, by the epoch of the send refused
	lost                           bool        // the state was damaged: answers count as after
	all, after                     map[int]int // statuses
}

// run starts the clients, each posting send i with post(i) and calling
// onCreated with the count of 201s after each (under the burst's lock).
func (b *lossBurst) run(wg *sync.WaitGroup, post func(i int) int, onCreated func(ok int)) {
	b.changed = sync.NewCond(&b.mu)
	b.waiting, b.all, b.after = map[int]int{}, map[int]int{}, map[int]int{}
	for range b.clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.client(post, onCreated)
		}()
	}
}

// client is one client of the burst, sending until the budget is spent or
// the burst is over.
func (b *lossBurst) client(post func(i int) int, onCreated func(ok int)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.next < b.budget {
		i := b.next
		b.next++
		for i >= b.gate && b.ok < b.gate && b.outstanding > 0 {
			b.changed.Wait()
		}
		epoch := b.epoch
		b.outstanding++
		b.mu.Unlock()
		status := post(i)
		b.mu.Lock()
		b.outstanding--
		b.all[status]++
		if b.lost {
			b.after[status]++
		}
		b.changed.Broadcast()
		if status == http.StatusCreated {
			b.ok++
			b.epoch++
			onCreated(b.ok)
			continue
		}
		b.waiting[epoch]++
		for b.epoch == epoch && b.outstanding > 0 {
			b.changed.Wait()
		}
		b.waiting[epoch]--
		if b.epoch == epoch {
			break
		}
	}
	b.exited++
	b.changed.Broadcast()
}

// still reports, under the lock, that the burst stands still: every client
// left has its send at the relay (held there) or was refused since the
// last change; with refused, at least one was. It reports true too once
// every client has stopped.
func (b *lossBurst) still(atRelay int, refused bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	w := b.waiting[b.epoch]
	return b.exited == b.clients ||
		b.outstanding+w == b.clients-b.exited && atRelay == b.ok+b.outstanding && (!refused || w > 0)
}

// over reports that every client has stopped.
func (b *lossBurst) over() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.exited == b.clients
}

// damaged marks the damage done and wakes the refused clients to try
// again.
func (b *lossBurst) damaged() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lost = true
	b.epoch++
	b.changed.Broadcast()
}

// String is the burst's tally, for failure messages.
func (b *lossBurst) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return fmt.Sprintf("statuses %v, after the loss %v; %d 201s, %d in flight, %d clients stopped", b.all, b.after, b.ok, b.outstanding, b.exited)
}

// postSend posts send i from inbox through s, and returns the status (-1
// if there is no answer).
func postSend(client *http.Client, s *server, inbox string, i int) int {
	body, _ := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"},
		"subject": fmt.Sprint("Burst ", i), "body": "Hi"})
	r, err := client.Post(s.URL+"/v1/messages", "application/json", bytes.NewReader(body))
	if err != nil {
		return -1
	}
	r.Body.Close()
	return r.StatusCode
}

// checkBurst fails the test unless every answer was 201 or 429, and after
// the loss sends were both answered 201 and refused 429: the throttle
// worked on, it did not fail.
func checkBurst(t *testing.T, b *lossBurst) {
	t.Helper()
	t.Log(b)
	for status, n := range b.all {
		if status != http.StatusCreated && status != http.StatusTooManyRequests {
			t.Errorf("%d answers %d, want only 201 and 429 (all: %v)", n, status, b.all)
		}
	}
	if b.after[http.StatusCreated] == 0 || b.after[http.StatusTooManyRequests] == 0 {
		t.Errorf("after the loss: %v, want sends both answered 201 and refused 429", b.after)
	}
}

// checkLossWindows reads when each send counted from the durable record
// (send_log, in PostgreSQL) and when the relay took each message, and
// fails the test if any 60 s holds more than a per-minute limit or any
// 3600 s more than a per-hour one: globally, and per inbox. A limit of 0
// is none.
func checkLossWindows(t *testing.T, cfg config.Config, mx *smtptest.Server) {
	t.Helper()
	st, err := app.OpenStore(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.SQL().Query(`SELECT scope, counted_at FROM send_log WHERE counted_at IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all []time.Time
	byScope := map[string][]time.Time{}
	for rows.Next() {
		var (
			scope string
			at    time.Time
		)
		if err := rows.Scan(&scope, &at); err != nil {
			t.Fatal(err)
		}
		all = append(all, at)
		byScope[scope] = append(byScope[scope], at)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	checkSpans(t, "send_log, global", all, cfg.SendRateLimitPerMinute, cfg.SendRateLimitPerHour)
	// A burst lasts minutes: all of it lies within one day.
	if d := cfg.SendRateLimitPerDay; d > 0 && len(all) > d {
		t.Errorf("send_log, global: %d sends counted within a day, limit %d a day", len(all), d)
	}
	for scope, times := range byScope {
		checkSpans(t, "send_log, inbox "+scope, times, cfg.InboxSendRateLimitPerMinute, cfg.InboxSendRateLimitPerHour)
	}
	relay := map[string][]time.Time{}
	var relayAll []time.Time
	for _, m := range mx.Messages() {
		relay[m.From] = append(relay[m.From], m.Received)
		relayAll = append(relayAll, m.Received)
	}
	checkSpans(t, "relay, global", relayAll, cfg.SendRateLimitPerMinute, cfg.SendRateLimitPerHour)
	for from, times := range relay {
		checkSpans(t, "relay, from "+from, times, cfg.InboxSendRateLimitPerMinute, cfg.InboxSendRateLimitPerHour)
	}
}

// checkSpans fails the test if any 60 s of times holds more than perMinute
// or any 3600 s more than perHour (0: no limit).
func checkSpans(t *testing.T, what string, times []time.Time, perMinute, perHour int) {
	t.Helper()
	slices.SortFunc(times, func(a, b time.Time) int { return a.Compare(b) })
	for _, w := range []struct {
		span  time.Duration
		limit int
	}{{time.Minute, perMinute}, {time.Hour, perHour}} {
		if w.limit == 0 {
			continue
		}
		most, from := 0, time.Time{}
		for i, start := range times {
			end, _ := slices.BinarySearchFunc(times, start.Add(w.span), func(a, b time.Time) int { return a.Compare(b) })
			if n := end - i; n > most {
				most, from = n, start
			}
		}
		if most > w.limit {
			t.Errorf("%s: %d sends in the %v from %s, want at most %d", what, most, w.span, from.Format(time.RFC3339Nano), w.limit)
		}
	}
}
