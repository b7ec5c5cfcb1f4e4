// Package hookrecv is a webhook receiver for tests: an HTTP server on
// loopback that records every request it is sent, answers each as the
// test scripts it (200 by default), and verifies signatures with the
// Standard Webhooks spec's own library, as an application would.
package hookrecv

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// Request is one request received.
type Request struct {
	At     time.Time
	Header http.Header
	Body   []byte
	Status int // what it was answered
}

// ID is the request's webhook-id.
func (r Request) ID() string { return r.Header.Get("webhook-id") }

// Answer is a scripted answer.
type Answer struct {
	Status int
	Header http.Header
	// Body replaces the answer's body ("answered <status text>").
	Body string
	// Hold, when set, is waited on before answering.
	Hold <-chan struct{}
}

// Receiver records requests. It is safe for concurrent use.
type Receiver struct {
	*httptest.Server
	mu      sync.Mutex
	reqs    []Request
	script  []Answer
	arrived chan struct{}
}

// Start starts a receiver until the end of the test.
func Start(tb testing.TB) *Receiver {
	r := &Receiver{arrived: make(chan struct{}, 1)}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	tb.Cleanup(r.Close)
	return r
}

// Then scripts the answers to the next requests, in order; once they are
// used up, requests are answered 200.
func (r *Receiver) Then(as ...Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.script = append(r.script, as...)
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	a := Answer{Status: http.StatusOK}
	if len(r.script) > 0 {
		a, r.script = r.script[0], r.script[1:]
	}
	r.mu.Unlock()
	if a.Hold != nil {
		<-a.Hold
	}
	for k, v := range a.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(a.Status)
	if a.Body == "" {
		a.Body = "answered " + http.StatusText(a.Status)
	}
	_, _ = io.WriteString(w, a.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, Request{At: time.Now(), Header: req.Header.Clone(), Body: body, Status: a.Status})
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

// Requests returns every request received so far.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}

// Wait waits until match holds of the requests received, or fails the
// test after timeout.
func (r *Receiver) Wait(tb testing.TB, timeout time.Duration, what string, match func([]Request) bool) []Request {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		if reqs := r.Requests(); match(reqs) {
			return reqs
		}
		select {
		case <-r.arrived:
		case <-time.After(50 * time.Millisecond):
		case <-deadline.C:
			tb.Fatalf("webhook receiver: %s not seen within %s; got %d requests: %s", what, timeout, len(r.Requests()), r.summary())
			return nil
		}
	}
}

func (r *Receiver) summary() string {
	var b strings.Builder
	for _, q := range r.Requests() {
		b.WriteString("\n  " + q.At.Format("15:04:05.000") + " " + q.ID() + " " + http.StatusText(q.Status) + " " + string(q.Body[:min(len(q.Body), 120)]))
	}
	return b.String()
}

// Verify checks a request's signature with secret, as the spec's library
// does for a receiver (the timestamp within its tolerance).
func Verify(secret string, q Request) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(q.Body, q.Header)
}

// Of returns the requests whose body has type typ and whose data is about
// message id ("" for any).
func Of(reqs []Request, typ, id string) []Request {
	var out []Request
	for _, q := range reqs {
		if strings.Contains(string(q.Body), `"type":"`+typ+`"`) && (id == "" || strings.Contains(string(q.Body), `"id":"`+id+`"`)) {
			out = append(out, q)
		}
	}
	return out
}
