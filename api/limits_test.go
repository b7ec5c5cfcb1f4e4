package api

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/skuld"
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
	return New(Options{Store: st, Sender: fakeSender(nil), Limiter: skuld.NewGlobalRateLimiter(0, 0),
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
	req := httptest.NewRequestWithContext(ctx, "POST", "/v1/search", strings.NewReader(`{"inbox_id":"i","query":"invoice"}`))
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
	o := Options{Store: fakeStore{}, Sender: sender, Limiter: skuld.NewGlobalRateLimiter(0, 0),
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
