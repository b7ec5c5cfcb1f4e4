package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// hotSender keeps a shared throttle hot during a run (-hot-every): a second
// inbox is limited to one send a minute and an hour and sends once, then
// it sends again before the run and every interval during it, each refused
// (429). A shared throttle that refused a send, or admitted one near a
// limit, drains its spare admissions and sends commits at once for the
// next 2 s, so the load runs near the limits, where spares stop.
type hotSender struct {
	mu     sync.Mutex
	status map[string]int // HTTP status of the sends during the run
	done   chan struct{}
	wg     sync.WaitGroup
}

// startHot prepares the limited inbox, checks that its second send is
// refused, and sends from it every interval until stop.
func startHot(ctx context.Context, hc *http.Client, cfg loadConfig, every time.Duration) (*hotSender, error) {
	id, err := createInbox(ctx, hc, cfg)
	if err != nil {
		return nil, err
	}
	patch, _ := json.Marshal(map[string]any{"rate_limit": map[string]int{"per_minute": 1, "per_hour": 1}})
	req, err := newRequest(ctx, cfg, http.MethodPatch, "/v1/inboxes/"+id, patch)
	if err != nil {
		return nil, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("limit the hot inbox: %w", err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("limit the hot inbox: status %d", res.StatusCode)
	}
	hcfg := cfg
	hcfg.inboxID, hcfg.preferAsync = id, false // its refusals are the point
	body, _ := json.Marshal(map[string]any{"inbox_id": id, "to": []string{"hot@loadtest.test"},
		"subject": "Hot", "body": "Refused."})
	for i, want := range []int{http.StatusCreated, http.StatusTooManyRequests} {
		if a, err := postSend(ctx, hc, hcfg, body); a.code != want {
			return nil, fmt.Errorf("hot inbox send %d: status %d (%v), want %d", i+1, a.code, err, want)
		}
	}
	h := &hotSender{status: map[string]int{}, done: make(chan struct{})}
	h.wg.Go(func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				a, _ := postSend(ctx, hc, hcfg, body)
				h.mu.Lock()
				h.status[strconv.Itoa(a.code)]++
				h.mu.Unlock()
			}
		}
	})
	return h, nil
}

// stop ends the sends and returns their HTTP statuses.
func (h *hotSender) stop() map[string]int {
	close(h.done)
	h.wg.Wait()
	return h.status
}
