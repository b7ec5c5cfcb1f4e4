package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// requestTimeout bounds one request: longer than the server's own 60 s
// provider timeout, so a slow send is measured rather than cut off.
const requestTimeout = 90 * time.Second

// loadConfig is one load run against a server that is already up.
type loadConfig struct {
	baseURL  string
	apiKey   string
	inboxID  string
	clients  int
	duration time.Duration
	requests int // 0: only duration bounds the run
	now      func() time.Time
	// scheduledAt, when set, is every message's scheduled_at.
	scheduledAt time.Time
	// preferAsync sends Prefer: respond-async with every send.
	preferAsync bool
	// keepIDs keeps the ids of the messages accepted (sent or queued),
	// for a -webhooks run to look for their events.
	keepIDs bool
}

// tally is what one client saw; clients keep their own so that the hot loop
// shares nothing but the request counter, and tallies are merged at the end.
type tally struct {
	latencies  []time.Duration
	httpStatus map[int]int // 0 counts transport errors
	sendStatus map[string]int
	firstErr   error
	keepIDs    bool
	ids        []string // with keepIDs: the messages sent or queued
}

func newTally() *tally {
	return &tally{httpStatus: make(map[int]int), sendStatus: make(map[string]int)}
}

func (t *tally) merge(o *tally) {
	t.latencies = append(t.latencies, o.latencies...)
	t.ids = append(t.ids, o.ids...)
	for k, v := range o.httpStatus {
		t.httpStatus[k] += v
	}
	for k, v := range o.sendStatus {
		t.sendStatus[k] += v
	}
	if t.firstErr == nil {
		t.firstErr = o.firstErr
	}
}

// loadResult is a whole run: the merged tallies, when its first request
// started and how long it took to the last answer.
type loadResult struct {
	*tally
	start   time.Time
	elapsed time.Duration
}

// newHTTPClient returns a keep-alive client that can hold one idle
// connection per load client, so the run measures the server rather than
// TCP handshakes.
func newHTTPClient(clients int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = clients
	tr.MaxIdleConnsPerHost = clients
	tr.Proxy = nil // loopback: an HTTP_PROXY from the environment must not apply
	return &http.Client{Transport: tr, Timeout: requestTimeout}
}

// runLoad runs cfg.clients clients, each posting sends in a loop until the
// duration has passed or cfg.requests requests have started. Requests in
// flight when the duration ends are allowed to finish; ctx cancels them.
func runLoad(ctx context.Context, hc *http.Client, cfg loadConfig) loadResult {
	fields := map[string]any{
		"inbox_id": cfg.inboxID, "to": []string{"load@loadtest.test"},
		"subject": "Load test", "body": "A message from **nornweave-load**.",
	}
	if !cfg.scheduledAt.IsZero() {
		fields["scheduled_at"] = cfg.scheduledAt.Format(time.RFC3339)
	}
	body, _ := json.Marshal(fields)
	start := cfg.now()
	deadline := start.Add(cfg.duration)
	var started atomic.Int64
	tallies := make([]*tally, cfg.clients)
	var wg sync.WaitGroup
	for i := range tallies {
		tallies[i] = newTally()
		tallies[i].keepIDs = cfg.keepIDs
		wg.Go(func() {
			t := tallies[i]
			for ctx.Err() == nil && cfg.now().Before(deadline) {
				if n := started.Add(1); cfg.requests > 0 && n > int64(cfg.requests) {
					return
				}
				t.record(cfg.now, func() (sendAnswer, error) { return postSend(ctx, hc, cfg, body) })
			}
		})
	}
	wg.Wait()
	total := newTally()
	for _, t := range tallies {
		total.merge(t)
	}
	return loadResult{tally: total, start: start, elapsed: cfg.now().Sub(start)}
}

// record times one request and counts its outcome.
func (t *tally) record(now func() time.Time, do func() (sendAnswer, error)) {
	t0 := now()
	a, err := do()
	t.latencies = append(t.latencies, now().Sub(t0))
	t.httpStatus[a.code]++
	if a.status != "" {
		t.sendStatus[a.status]++
	}
	if t.keepIDs && a.id != "" && (a.status == "sent" || a.status == "queued") {
		t.ids = append(t.ids, a.id)
	}
	if err != nil && t.firstErr == nil {
		t.firstErr = err
	}
}

// sendAnswer is what one POST /v1/messages got.
type sendAnswer struct {
	code   int    // HTTP status, 0 on a transport error
	status string // the send status of a 201 or 202
	id     string // the message id of a 201 or 202
}

// postSend posts one send and returns what it was answered.
func postSend(ctx context.Context, hc *http.Client, cfg loadConfig, body []byte) (sendAnswer, error) {
	req, err := newRequest(ctx, cfg, http.MethodPost, "/v1/messages", body)
	if err != nil {
		return sendAnswer{}, err
	}
	if cfg.preferAsync {
		req.Header.Set("Prefer", "respond-async")
	}
	res, err := hc.Do(req)
	if err != nil {
		return sendAnswer{}, err
	}
	defer res.Body.Close()
	a := sendAnswer{code: res.StatusCode}
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusAccepted {
		// Drained so the connection goes back to the pool.
		_, err := io.Copy(io.Discard, res.Body)
		return a, err
	}
	var sr struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	if err := json.NewDecoder(res.Body).Decode(&sr); err != nil {
		a.status = "undecodable"
		return a, fmt.Errorf("decode %d body: %w", res.StatusCode, err)
	}
	a.status, a.id = sr.Status, sr.ID
	_, err = io.Copy(io.Discard, res.Body)
	return a, err
}

// do posts a JSON body to path with the API key, if any.
func do(ctx context.Context, hc *http.Client, cfg loadConfig, path string, body []byte) (*http.Response, error) {
	req, err := newRequest(ctx, cfg, http.MethodPost, path, body)
	if err != nil {
		return nil, err
	}
	return hc.Do(req)
}

// newRequest is a request to the server with the API key, if any, and a
// JSON body, if any.
func newRequest(ctx context.Context, cfg loadConfig, method, path string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, cfg.baseURL+path, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if cfg.apiKey != "" {
		req.Header.Set("X-API-Key", cfg.apiKey)
	}
	return req, nil
}

// createInbox creates an inbox with a random username, so runs against the
// same database never collide on an address, and returns its id.
func createInbox(ctx context.Context, hc *http.Client, cfg loadConfig) (string, error) {
	var rnd [6]byte
	_, _ = rand.Read(rnd[:]) // crypto/rand.Read never fails
	body, _ := json.Marshal(map[string]string{"name": "Load test", "email_username": "load-" + hex.EncodeToString(rnd[:])})
	res, err := do(ctx, hc, cfg, "/v1/inboxes", body)
	if err != nil {
		return "", fmt.Errorf("create inbox: %w", err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("create inbox: status %d: %s", res.StatusCode, bytes.TrimSpace(raw))
	}
	var ir struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &ir); err != nil || ir.ID == "" {
		return "", fmt.Errorf("create inbox: unexpected body %s", raw)
	}
	return ir.ID, nil
}
