package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

// fakeClock is a now that moves only when told.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestReceiver is a receiver that knows testKey, on clock.
func newTestReceiver(t *testing.T, name string, failFirst int, clock *fakeClock) *receiver {
	t.Helper()
	r := newReceiver(name, failFirst, clock.now)
	if err := r.setSecret("whsec_" + base64.StdEncoding.EncodeToString(testKey)); err != nil {
		t.Fatal(err)
	}
	return r
}

// deliver posts message msgID's message.sent as event id to r, signed with
// key, and returns the status r answered.
func deliver(r *receiver, id, msgID string, key []byte) int {
	body := fmt.Sprintf(`{"type":"message.sent","timestamp":"2026-11-27T10:00:00Z","data":{"id":%q,"status":"sent"}}`, msgID)
	ts := strconv.FormatInt(time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC).Unix(), 10)
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "." + body))
	req := httptest.NewRequest(http.MethodPost, "/hook/"+r.name, strings.NewReader(body))
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", ts)
	req.Header.Set("webhook-signature", "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	return rec.Code
}

// TestReceiverFailsFirstAttemptsOfEachEvent checks the script (500 to the
// first failFirst attempts of each webhook-id, 200 after, ids counted
// apart) and what the report counts of it.
func TestReceiverFailsFirstAttemptsOfEachEvent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		failFirst int
		want      []int // the answers to e1, e2, e1, e1, e2, e1, e2, in that order
		want500   int
		maxPerID  int
		missing   int // of msg1, msg2, msg3 (never sent)
	}{
		{name: "always 200", failFirst: 0, want: []int{200, 200, 200, 200, 200, 200, 200},
			maxPerID: 4, missing: 1},
		{name: "fail first two", failFirst: 2, want: []int{500, 500, 500, 200, 500, 200, 200},
			want500: 4, maxPerID: 2, missing: 1},
		{name: "fail first three", failFirst: 3, want: []int{500, 500, 500, 500, 500, 200, 500},
			want500: 6, maxPerID: 1, missing: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := &fakeClock{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
			r := newTestReceiver(t, "B", tt.failFirst, clock)
			ids := []string{"e1", "e2", "e1", "e1", "e2", "e1", "e2"}
			for i, id := range ids {
				if got := deliver(r, id, "msg"+id[1:], testKey); got != tt.want[i] {
					t.Errorf("request %d (%s): answered %d, want %d", i+1, id, got, tt.want[i])
				}
			}
			rep := r.report([]string{"msg1", "msg2", "msg3"}, clock.now())
			if rep.Requests != len(ids) || rep.Answered500 != tt.want500 {
				t.Errorf("requests %d, answered 500 %d; want %d and %d", rep.Requests, rep.Answered500, len(ids), tt.want500)
			}
			if rep.MaxPerID != tt.maxPerID {
				t.Errorf("max 2xx per id = %d, want %d", rep.MaxPerID, tt.maxPerID)
			}
			if rep.MissingSent != tt.missing {
				t.Errorf("missing = %d, want %d", rep.MissingSent, tt.missing)
			}
			if rep.BadSignatures != 0 || rep.BadRequests != 0 {
				t.Errorf("bad signatures %d, bad requests %d; want 0 and 0", rep.BadSignatures, rep.BadRequests)
			}
		})
	}
}

// TestReceiverFailsFirstRequests checks -webhook-fail-requests: the
// receiver's first requests are answered 500 whatever their event, and
// answers() records each event's answers in order, which the delivery
// log is compared with.
func TestReceiverFailsFirstRequests(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)}
	r := newTestReceiver(t, "B", 0, clock)
	r.failRequests = 2
	want := []int{500, 500, 200, 200, 200}
	for i, id := range []string{"e1", "e2", "e1", "e2", "e3"} {
		if got := deliver(r, id, "msg"+id[1:], testKey); got != want[i] {
			t.Errorf("request %d (%s): answered %d, want %d", i+1, id, got, want[i])
		}
	}
	got := r.answers()
	if len(got) != 3 || !slices.Equal(got["e1"], []int{500, 200}) || !slices.Equal(got["e2"], []int{500, 200}) ||
		!slices.Equal(got["e3"], []int{200}) {
		t.Errorf("answers = %v", got)
	}
}

// TestReceiverConcurrentAttempts checks that attempts of one event that
// arrive together are still counted one by one: exactly failFirst 500s.
func TestReceiverConcurrentAttempts(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Now()}
	r := newTestReceiver(t, "B", 2, clock)
	const events, attempts = 20, 5
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		codes = map[int]int{}
	)
	for e := range events {
		for range attempts {
			wg.Go(func() {
				code := deliver(r, fmt.Sprintf("evt_%d", e), fmt.Sprintf("msg_%d", e), testKey)
				mu.Lock()
				codes[code]++
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if codes[500] != 2*events || codes[200] != (attempts-2)*events {
		t.Errorf("answers %v, want 500=%d 200=%d", codes, 2*events, (attempts-2)*events)
	}
	if rep := r.report(nil, clock.now()); rep.Delivered != events || rep.MaxPerID != attempts-2 {
		t.Errorf("delivered %d, max per id %d; want %d and %d", rep.Delivered, rep.MaxPerID, events, attempts-2)
	}
}

// TestReceiverRefusesWhatIsNotADelivery checks the signature and the
// shape: a bad signature is counted but answered as scripted, a request
// without a webhook-id or a JSON body is a bad request.
func TestReceiverRefusesWhatIsNotADelivery(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{t: time.Now()}
	r := newTestReceiver(t, "A", 0, clock)
	if got := deliver(r, "e1", "m1", []byte("another key, another key, 32 by")); got != http.StatusOK {
		t.Errorf("badly signed delivery answered %d, want 200", got)
	}
	for _, bad := range []struct{ id, body string }{
		{"", `{"type":"message.sent","data":{"id":"m2"}}`}, // no webhook-id
		{"e3", `not json`},
	} {
		req := httptest.NewRequest(http.MethodPost, "/hook/A", strings.NewReader(bad.body))
		if bad.id != "" {
			req.Header.Set("webhook-id", bad.id)
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Errorf("id %q, body %q: answered %d, want 400", bad.id, bad.body, rec.Code)
		}
	}
	rep := r.report(nil, clock.now())
	if rep.BadSignatures != 1 || rep.BadRequests != 2 || rep.Requests != 3 || rep.Delivered != 1 {
		t.Errorf("bad signatures %d, bad requests %d, requests %d, delivered %d; want 1, 2, 3, 1",
			rep.BadSignatures, rep.BadRequests, rep.Requests, rep.Delivered)
	}
}

// TestValidSignatureDuringRotation checks that one good signature among
// several is enough, as the spec's libraries do.
func TestValidSignatureDuringRotation(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"message.sent"}`)
	mac := hmac.New(sha256.New, testKey)
	mac.Write([]byte("evt_1.1795770000." + string(body)))
	good := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	tests := []struct {
		name, header string
		want         bool
	}{
		{"one good", good, true},
		{"old then new", "v1,AAAA " + good, true},
		{"none good", "v1,AAAA v1,BBBB", false},
		{"wrong version", strings.Replace(good, "v1,", "v2,", 1), false},
		{"empty", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validSignature(testKey, "evt_1", "1795770000", body, tt.header); got != tt.want {
				t.Errorf("validSignature(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

// TestAtAll checks that an event counts once it reached every receiver,
// at the later of its first 2xx answers.
func TestAtAll(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	clock := &fakeClock{t: t0}
	a := newTestReceiver(t, "A", 0, clock)
	b := newTestReceiver(t, "B", 1, clock)
	deliver(a, "e1", "m1", testKey) // A: e1 at 0 s
	deliver(b, "e1", "m1", testKey) // B: 500
	clock.advance(time.Second)
	deliver(a, "e2", "m2", testKey) // A: e2 at 1 s; never 2xx at B
	deliver(b, "e2", "m2", testKey) // B: 500
	clock.advance(2 * time.Second)
	deliver(b, "e1", "m1", testKey) // B: e1 at 3 s
	clock.advance(time.Second)
	deliver(a, "e1", "m1", testKey) // A: e1 again, 4 s, does not move its first 2xx

	n, last := atAll([]*receiver{a, b})
	if n != 1 || !last.Equal(t0.Add(3*time.Second)) {
		t.Errorf("atAll = %d at %v, want 1 at %v", n, last.Sub(t0), 3*time.Second)
	}
	if rep := a.report([]string{"m1", "m2"}, t0); rep.MaxPerID != 2 || rep.LastDeliverySec != 1 || rep.DeliveredPerSec != 2 {
		t.Errorf("A: max per id %d, last delivery at %v s, %v/s; want 2, 1 s and 2/s",
			rep.MaxPerID, rep.LastDeliverySec, rep.DeliveredPerSec)
	}
}
