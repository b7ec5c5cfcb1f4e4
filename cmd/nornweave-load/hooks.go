package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// maxHookBody bounds what a receiver reads of one delivery: an event
// carries a message without its bodies, a few KiB.
const maxHookBody = 1 << 20

// A receiver is one of the load tool's own webhook endpoints (-webhooks):
// an HTTP server on loopback that answers 500 to the first failFirst
// attempts of each event (by webhook-id) and 200 to every attempt after,
// checks each signature as an application would, and counts what it was
// sent. It is safe for concurrent use; Close may be called more than once.
type receiver struct {
	name      string
	failFirst int
	// failRequests is how many of the receiver's first requests, whatever
	// their event, it answers 500 (-webhook-fail-requests).
	failRequests int
	now          func() time.Time
	srv          *http.Server
	ln           net.Listener
	done         chan struct{}

	mu          sync.Mutex
	key         []byte                // the endpoint's secret, decoded
	events      map[string]*hookEvent // webhook-id → what arrived of it
	sent        map[string]bool       // message ids whose message.sent was answered 2xx
	requests    int
	answered500 int
	badSig      int
	badRequests int
	closed      bool
}

// hookEvent is one event (one webhook-id) as a receiver saw it.
type hookEvent struct {
	typ      string
	msgID    string // data.id
	attempts int    // requests carrying the id
	ok       int    // of them, answered 2xx
	answers  []int  // each request's answer, in the order they came
	firstOK  time.Time
}

// newReceiver returns a receiver that is not serving yet: ServeHTTP alone
// is what a test drives.
func newReceiver(name string, failFirst int, now func() time.Time) *receiver {
	return &receiver{name: name, failFirst: failFirst, now: now,
		events: map[string]*hookEvent{}, sent: map[string]bool{}}
}

// startReceiver serves r on a free loopback port until Close.
func startReceiver(name string, failFirst int, now func() time.Time) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := newReceiver(name, failFirst, now)
	r.ln, r.done = ln, make(chan struct{})
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		_ = r.srv.Serve(ln) // returns once Close closes the listener
	}()
	return r, nil
}

// URL is the address to register.
func (r *receiver) URL() string { return "http://" + r.ln.Addr().String() + "/hook/" + r.name }

// Close stops serving and drops every connection.
func (r *receiver) Close() {
	r.mu.Lock()
	if r.closed || r.srv == nil {
		r.closed = true
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	_ = r.srv.Close()
	<-r.done
}

// setSecret is the endpoint's signing secret, whsec_ and base64, as its
// registration answered; every request after is checked against it.
func (r *receiver) setSecret(secret string) error {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return errors.New("the secret does not start with whsec_")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.key = key
	r.mu.Unlock()
	return nil
}

// ServeHTTP implements http.Handler: one delivery attempt.
func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, maxHookBody))
	id := req.Header.Get("webhook-id")
	var ev struct {
		Type string `json:"type"`
		Data struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	r.mu.Lock()
	r.requests++
	if err != nil || id == "" || req.Method != http.MethodPost {
		r.badRequests++
		r.mu.Unlock()
		http.Error(w, "not a webhook delivery", http.StatusBadRequest)
		return
	}
	if !validSignature(r.key, id, req.Header.Get("webhook-timestamp"), body, req.Header.Get("webhook-signature")) {
		// Answered as scripted all the same: a bad signature is a
		// violation to report, not a reason to skew the counts.
		r.badSig++
	}
	e := r.events[id]
	if e == nil {
		e = &hookEvent{typ: ev.Type, msgID: ev.Data.ID}
		r.events[id] = e
	}
	e.attempts++
	status := http.StatusOK
	if e.attempts <= r.failFirst || r.requests <= r.failRequests {
		status = http.StatusInternalServerError
		r.answered500++
	} else {
		e.ok++
		if e.ok == 1 {
			e.firstOK = r.now()
			if e.typ == "message.sent" && e.msgID != "" {
				r.sent[e.msgID] = true
			}
		}
	}
	e.answers = append(e.answers, status)
	r.mu.Unlock()
	w.WriteHeader(status)
}

// answers returns each event's answers, by webhook-id.
func (r *receiver) answers() map[string][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string][]int, len(r.events))
	for id, e := range r.events {
		out[id] = slices.Clone(e.answers)
	}
	return out
}

// validSignature checks a Standard Webhooks signature: one of the
// space-separated "v1,<base64 HMAC-SHA256 of id.timestamp.body>".
func validSignature(key []byte, id, timestamp string, body []byte, header string) bool {
	if key == nil || timestamp == "" {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(header) {
		v, b64, ok := strings.Cut(sig, ",")
		if !ok || v != "v1" {
			continue
		}
		if got, err := base64.StdEncoding.DecodeString(b64); err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// missing is how many of the message ids have no message.sent answered
// 2xx here yet.
func (r *receiver) missing(msgIDs []string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, id := range msgIDs {
		if !r.sent[id] {
			n++
		}
	}
	return n
}

// delivered returns, for each event answered 2xx, the time of its first
// 2xx answer.
func (r *receiver) delivered() map[string]time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]time.Time, len(r.events))
	for id, e := range r.events {
		if e.ok > 0 {
			out[id] = e.firstOK
		}
	}
	return out
}

// receiverReport is what one receiver saw.
type receiverReport struct {
	Name        string `json:"name"`
	EndpointID  string `json:"endpoint_id"`
	FailFirst   int    `json:"fail_first"`
	Requests    int    `json:"requests"`
	Answered500 int    `json:"answered_500"`
	// Delivered counts the distinct webhook-ids answered 2xx; MaxPerID is
	// the most 2xx answers one of them got (more than one: delivered again).
	Delivered int `json:"delivered"`
	MaxPerID  int `json:"max_deliveries_per_id"`
	// DeliveredPerSec is Delivered per second from the run's first request
	// to the last first 2xx here (LastDeliverySec).
	DeliveredPerSec float64 `json:"delivered_per_second"`
	LastDeliverySec float64 `json:"last_delivery_seconds"`
	BadSignatures   int     `json:"bad_signatures"`
	BadRequests     int     `json:"bad_requests"`
	// MissingSent counts the sent messages whose message.sent was not
	// answered 2xx here.
	MissingSent    int    `json:"missing_sent"`
	Enabled        bool   `json:"enabled"`
	DisabledReason string `json:"disabled_reason,omitempty"`
	// LogEvents is how many events the server's delivery log holds for the
	// endpoint, LogMismatches how many of them were not tried as the
	// receiver answers (failFirst × 500, then 200).
	LogEvents     int `json:"log_events"`
	LogMismatches int `json:"log_mismatches"`
}

// report counts what r saw; msgIDs are the messages sent, from start on.
func (r *receiver) report(msgIDs []string, start time.Time) receiverReport {
	missing := r.missing(msgIDs)
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := receiverReport{Name: r.name, FailFirst: r.failFirst, Requests: r.requests, Answered500: r.answered500,
		BadSignatures: r.badSig, BadRequests: r.badRequests, MissingSent: missing}
	var last time.Time
	for _, e := range r.events {
		if e.ok > 0 {
			rep.Delivered++
			if e.firstOK.After(last) {
				last = e.firstOK
			}
		}
		rep.MaxPerID = max(rep.MaxPerID, e.ok)
	}
	if span := last.Sub(start).Seconds(); rep.Delivered > 0 && span > 0 {
		rep.LastDeliverySec = span
		rep.DeliveredPerSec = float64(rep.Delivered) / span
	}
	return rep
}
