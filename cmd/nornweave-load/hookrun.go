package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// logPage is a delivery log page: the API's MaxLimit (api/inboxes.go).
const logPage = 500

// hookRun is a -webhooks run: receiver A, which answers every attempt 200,
// and receiver B, which answers the first failFirst attempts of each event
// 500, each registered with the server for message.sent.
type hookRun struct {
	hc        *http.Client
	cfg       loadConfig
	rs        []*receiver
	endpoints []string // the endpoint ids, as rs
	keep      bool     // leave the endpoints registered on Close
}

// startHooks starts the receivers and registers them. keep leaves them
// registered on Close: a spawned server's database is kept for a look at
// its delivery log, which goes with its endpoint.
func startHooks(ctx context.Context, hc *http.Client, cfg loadConfig, failFirst, failRequests int, keep bool) (*hookRun, error) {
	h := &hookRun{hc: hc, cfg: cfg, keep: keep}
	for _, rc := range []struct {
		name          string
		fail, failReq int
	}{{"A", 0, 0}, {"B", failFirst, failRequests}} {
		r, err := startReceiver(rc.name, rc.fail, cfg.now)
		if err != nil {
			h.Close(ctx)
			return nil, fmt.Errorf("receiver %s: %w", rc.name, err)
		}
		r.failRequests = rc.failReq
		h.rs = append(h.rs, r)
		id, secret, err := h.register(ctx, r)
		if err == nil {
			err = r.setSecret(secret)
		}
		if err != nil {
			h.Close(ctx)
			return nil, fmt.Errorf("register receiver %s: %w", rc.name, err)
		}
		h.endpoints = append(h.endpoints, id)
	}
	return h, nil
}

// register is POST /v1/webhooks for r; it returns the endpoint's id and
// secret.
func (h *hookRun) register(ctx context.Context, r *receiver) (string, string, error) {
	body, _ := json.Marshal(map[string]any{"url": r.URL(), "events": []string{"message.sent"},
		"description": "nornweave-load receiver " + r.name})
	var ep struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	if err := h.call(ctx, http.MethodPost, "/v1/webhooks", body, http.StatusCreated, &ep); err != nil {
		return "", "", err
	}
	return ep.ID, ep.Secret, nil
}

// Close deletes the endpoints registered (unless keep), so a server that
// lives on does not go on delivering to receivers that are gone, and stops
// the receivers.
func (h *hookRun) Close(ctx context.Context) {
	for _, id := range h.endpoints {
		if !h.keep {
			_ = h.call(ctx, http.MethodDelete, "/v1/webhooks/"+id, nil, http.StatusNoContent, nil)
		}
	}
	h.endpoints = nil
	for _, r := range h.rs {
		r.Close()
	}
}

// call makes one request of the API and decodes its answer into out (nil:
// discarded); an answer other than want is an error.
func (h *hookRun) call(ctx context.Context, method, path string, body []byte, want int, out any) error {
	req, err := newRequest(ctx, h.cfg, method, path, body)
	if err != nil {
		return err
	}
	res, err := h.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: status %d: %s", method, path, res.StatusCode, raw[:min(len(raw), 300)])
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(raw, out)
}

// wait waits until every message of msgIDs has its message.sent answered
// 2xx at every receiver, at most limit; it stops early, with the reason,
// when an endpoint is disabled, since nothing more will come to it.
func (h *hookRun) wait(ctx context.Context, msgIDs []string, limit time.Duration) (bool, string) {
	deadline := time.Now().Add(limit)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	lastCheck := time.Now()
	for {
		missing := 0
		for _, r := range h.rs {
			missing += r.missing(msgIDs)
		}
		if missing == 0 {
			return true, ""
		}
		if time.Since(lastCheck) >= 2*time.Second {
			lastCheck = time.Now()
			for i, r := range h.rs {
				if on, reason, err := h.enabled(ctx, h.endpoints[i]); err == nil && !on {
					return false, fmt.Sprintf("endpoint %s was disabled: %s", r.name, reason)
				}
			}
		}
		if time.Now().After(deadline) {
			return false, fmt.Sprintf("%d deliveries missing after %s", missing, limit)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err().Error()
		case <-tick.C:
		}
	}
}

// enabled is GET /v1/webhooks/{id}: whether the endpoint is enabled, and
// if not, why.
func (h *hookRun) enabled(ctx context.Context, id string) (bool, string, error) {
	var ep struct {
		Enabled        bool    `json:"enabled"`
		DisabledReason *string `json:"disabled_reason"`
	}
	if err := h.call(ctx, http.MethodGet, "/v1/webhooks/"+id, nil, http.StatusOK, &ep); err != nil {
		return false, "", err
	}
	reason := ""
	if ep.DisabledReason != nil {
		reason = *ep.DisabledReason
	}
	return ep.Enabled, reason, nil
}

// checkLog reads the endpoint's whole delivery log and counts its events,
// and those whose attempts, in order, are not what the receiver answered
// them (answers, by webhook-id); it also returns the first such,
// described.
func (h *hookRun) checkLog(ctx context.Context, endpointID string, answers map[string][]int) (events, bad int, first string, err error) {
	type attempt struct {
		n      int
		status int // 0: no answer
	}
	byEvent := map[string][]attempt{}
	for offset := 0; ; offset += logPage {
		var page struct {
			Items []struct {
				EventID    string `json:"event_id"`
				Attempt    int    `json:"attempt"`
				StatusCode *int   `json:"status_code"`
			} `json:"items"`
			Total int `json:"total"`
		}
		path := fmt.Sprintf("/v1/webhooks/%s/deliveries?limit=%d&offset=%d", endpointID, logPage, offset)
		if err := h.call(ctx, http.MethodGet, path, nil, http.StatusOK, &page); err != nil {
			return 0, 0, "", err
		}
		for _, it := range page.Items {
			a := attempt{n: it.Attempt}
			if it.StatusCode != nil {
				a.status = *it.StatusCode
			}
			byEvent[it.EventID] = append(byEvent[it.EventID], a)
		}
		if len(page.Items) < logPage || offset+logPage >= page.Total {
			break
		}
	}
	for id, as := range byEvent {
		want := answers[id]
		slices.SortFunc(as, func(a, b attempt) int { return a.n - b.n })
		got := make([]int, len(as))
		for i, a := range as {
			got[i] = a.status
		}
		if !slices.Equal(got, want) {
			bad++
			if first == "" {
				first = fmt.Sprintf("event %s: attempts answered %v, want %v", id, got, want)
			}
		}
	}
	return len(byEvent), bad, first, nil
}

// webhookMetrics returns the server's nornweave_webhook_* samples, from
// GET /metrics: where a slow delivery's time went, from the inside.
func (h *hookRun) webhookMetrics(ctx context.Context) (map[string]float64, error) {
	req, err := newRequest(ctx, h.cfg, http.MethodGet, "/metrics", nil)
	if err != nil {
		return nil, err
	}
	res, err := h.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", res.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "nornweave_webhook") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if v, err := strconv.ParseFloat(line[i+1:], 64); i > 0 && err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}
