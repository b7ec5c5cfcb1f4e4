package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// slowStore's Messages runs until its context ends (or a second passes,
// which is the bug: a search nothing stops) and reports what stopped it.
type slowStore struct {
	Store
	stopped chan error
}

func (slowStore) Inbox(_ context.Context, id string) (*store.Inbox, error) {
	return &store.Inbox{ID: id}, nil
}

func (s slowStore) Messages(ctx context.Context, _ store.MessageFilter) ([]store.Message, int64, error) {
	select {
	case <-ctx.Done():
		s.stopped <- ctx.Err()
		return nil, 0, fmt.Errorf("store: list messages: %w", ctx.Err())
	case <-time.After(time.Second):
		s.stopped <- nil
		return []store.Message{}, 0, nil
	}
}

func (slowStore) MessageBodies(context.Context, []string, bool) (map[string]store.Bodies, error) {
	return map[string]store.Bodies{}, nil
}

func newSlowAPI(timeout time.Duration) (http.Handler, slowStore) {
	st := slowStore{stopped: make(chan error, 1)}
	return New(Options{Store: st, Sender: fakeSender(nil), Throttle: memThrottle(0, 0),
		SearchTimeout: timeout}), st
}

func TestSearchTimesOutWith503(t *testing.T) {
	for _, tc := range []struct{ method, path, body string }{
		{"POST", "/v1/search", `{"inbox_id":"i","query":"invoice"}`},
		{"GET", "/v1/messages?inbox_id=i&q=invoice", ""},
	} {
		t.Run(tc.method, func(t *testing.T) {
			h, st := newSlowAPI(20 * time.Millisecond)
			rec := serve(h, tc.method, tc.path, tc.body)
			if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"code":"search_timeout"`) {
				t.Errorf("got %d %s, want 503 search_timeout", rec.Code, rec.Body)
			}
			if err := <-st.stopped; err != context.DeadlineExceeded {
				t.Errorf("store query stopped by %v, want context.DeadlineExceeded", err)
			}
		})
	}
}

func TestSearchStopsWhenTheClientGoes(t *testing.T) {
	h, st := newSlowAPI(time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	req := localRequest("POST", "/v1/search", strings.NewReader(`{"inbox_id":"i","query":"invoice"}`)).WithContext(ctx)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() { h.ServeHTTP(rec, req); close(done) }()
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := <-st.stopped; err != context.Canceled {
		t.Errorf("store query stopped by %v, want context.Canceled", err)
	}
	<-done
	if rec.Code != statusClientClosed {
		t.Errorf("got %d %s, want %d", rec.Code, rec.Body, statusClientClosed)
	}
}

// TestInFlightBudgetSerializesLargeRequests: with room for one large
// request, three concurrent ones are processed one at a time, and a small
// request is not held up behind them.
func TestInFlightBudgetSerializesLargeRequests(t *testing.T) {
	var running, peak atomic.Int32
	release := make(chan struct{})
	sender := fakeSender(func() (*store.Message, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		<-release
		return &store.Message{ID: "m", Status: "sent"}, nil
	})
	o := Options{Store: fakeStore{}, Sender: sender, Throttle: memThrottle(0, 0),
		AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 2,
		RequestsInFlight: 1} // raised to one request limit
	h := New(o)
	limit := requestLimit(withLimitDefaults(o))
	large := validSend + strings.Repeat(" ", int(limit/2)) // two do not fit

	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if rec := serve(h, "POST", "/v1/messages", large); rec.Code != http.StatusCreated {
				t.Errorf("large send: got %d %s", rec.Code, rec.Body)
			}
		})
	}
	for running.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The budget is spent: a small send still gets through to the sender.
	wg.Go(func() { serve(h, "POST", "/v1/messages", validSend) })
	for running.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for a wrongly admitted large request to arrive
	close(release)
	wg.Wait()
	if got := peak.Load(); got != 2 {
		t.Errorf("peak concurrent sends = %d, want 2 (one large, one small)", got)
	}
}

// bodyBytes is the size of each of threadStore's bodies.
const bodyBytes = 16 << 10

// threadStore is a thread of n messages of bodyBytes each; it records
// the largest batch of bodies asked for at once.
type threadStore struct {
	Store
	n        int
	maxBatch *int64
}

func (threadStore) Thread(_ context.Context, id string) (*store.Thread, error) {
	return &store.Thread{ID: id, Subject: "long"}, nil
}

func (s threadStore) Messages(_ context.Context, f store.MessageFilter) ([]store.Message, int64, error) {
	ms := make([]store.Message, s.n)
	for i := range ms { // newest first, as the store answers
		at := time.Date(2026, 1, 1, 0, s.n-i, 0, 0, time.UTC)
		ms[i] = store.Message{ID: fmt.Sprint(s.n - 1 - i), CreatedAt: at, TextBytes: bodyBytes}
	}
	return ms, -1, nil
}

func (s threadStore) MessageBodies(_ context.Context, ids []string, _ bool) (map[string]store.Bodies, error) {
	*s.maxBatch = max(*s.maxBatch, int64(len(ids))*bodyBytes)
	out := map[string]store.Bodies{}
	for _, id := range ids {
		out[id] = store.Bodies{Text: "body of " + id + strings.Repeat(".", bodyBytes-20)}
	}
	return out, nil
}

// TestLongThreadIsReadInBatches: a thread's messages all come back, oldest
// first, but their bodies are never all in memory at once.
//
// The batches are of PageBytes, 8 MiB; here 256 KiB, with bodies of 16 KiB
// where they would be 1 MiB: the same batches for a 64th of the bytes.
func TestLongThreadIsReadInBatches(t *testing.T) {
	var maxBatch int64
	const n, pageBytes = 40, 256 << 10
	h := New(Options{Store: threadStore{n: n, maxBatch: &maxBatch}, Sender: fakeSender(nil),
		Throttle: memThrottle(0, 0), PageBytes: pageBytes})
	rec := serve(h, "GET", "/v1/threads/t", "")
	if rec.Code != http.StatusOK {
		t.Fatalf("got %d %.200s", rec.Code, rec.Body)
	}
	var got struct {
		ID       string `json:"id"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != "t" || len(got.Messages) != n {
		t.Fatalf("got thread %q with %d messages, want t with %d", got.ID, len(got.Messages), n)
	}
	for i, m := range got.Messages {
		if !strings.HasPrefix(m.Content, fmt.Sprintf("body of %d.", i)) {
			t.Errorf("message %d is %.12q, want body of %d (oldest first)", i, m.Content, i)
		}
	}
	if maxBatch > pageBytes || maxBatch < 2*bodyBytes {
		t.Errorf("read %d KiB of bodies at once, want batches of at most %d KiB", maxBatch>>10, pageBytes>>10)
	}
}
