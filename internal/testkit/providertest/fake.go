// Package providertest is a fake of the hosted email APIs (Mailgun,
// SendGrid, Resend, Amazon SES v2) on a loopback httptest server: it records
// every request, answers as the provider documents (Resend's
// Idempotency-Key included: a repeat of a key it took gets the first
// answer and sends nothing; and SES's GetAccount, whose quota a test sets),
// and can be told to fail, stall or drop the connection. Provider tests,
// the end-to-end tests and the benchmarks use it.
package providertest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Kinds are the providers the fake speaks for.
var Kinds = []string{"mailgun", "sendgrid", "resend", "ses"}

// Request is one request as the fake received it.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte
}

// Responder answers the nth request (from 1).
type Responder func(w http.ResponseWriter, r *http.Request, n int)

// Fake is a fake provider API. It is safe for concurrent use.
type Fake struct {
	*httptest.Server
	Kind string

	mu        sync.Mutex
	requests  []Request
	taken     map[string]int // Resend: Idempotency-Key → the request that took it
	respond   Responder
	delay     time.Duration
	sendCount int
	conns     atomic.Int64
	inFlight  int
	maxFlight int
	sesQuota  SESQuota // what GetAccount reports
}

// MaxInFlight is the most requests the fake was handling at once.
func (f *Fake) MaxInFlight() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.maxFlight
}

// Connections is the number of TCP connections the fake accepted.
func (f *Fake) Connections() int { return int(f.conns.Load()) }

// Start serves a fake of kind until the end of the test; it accepts every
// message until told otherwise.
func Start(tb testing.TB, kind string) *Fake {
	tb.Helper()
	f := &Fake{Kind: kind, taken: make(map[string]int), sesQuota: DefaultSESQuota}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(f.serve))
	f.Server.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			f.conns.Add(1)
		}
	}
	f.Server.Start()
	tb.Cleanup(f.Close)
	return f
}

// Close stops the server; unlike httptest's, it does not wait for stalled
// handlers beyond closing their connections.
func (f *Fake) Close() {
	f.Server.CloseClientConnections()
	f.Server.Close()
}

func (f *Fake) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.sendCount++
	n := f.sendCount
	// Benchmarks send thousands of messages: keep only the first few.
	if len(f.requests) < 1000 {
		f.requests = append(f.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	}
	respond, delay := f.respond, f.delay
	f.inFlight++
	f.maxFlight = max(f.maxFlight, f.inFlight)
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		f.inFlight--
		f.mu.Unlock()
	}()
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	key := r.Header.Get("Idempotency-Key")
	if f.Kind == "resend" && key != "" {
		if len(key) > 256 {
			writeJSON(w, http.StatusBadRequest, map[string]any{"statusCode": 400,
				"message": "The key must be between 1-256 chars.", "name": "invalid_idempotency_key"})
			return
		}
		f.mu.Lock()
		first, ok := f.taken[key]
		f.mu.Unlock()
		if ok {
			// Resend answers a repeated key with the first answer and
			// sends nothing.
			f.Accept(w, first)
			return
		}
	}
	sw := &statusWriter{ResponseWriter: w}
	switch {
	case respond != nil:
		respond(sw, r, n)
	case f.Kind == "ses" && r.URL.Path == sesAccountPath:
		f.sesAccount(sw, r)
	default:
		f.Accept(sw, n)
	}
	if f.Kind == "resend" && key != "" && sw.status/100 == 2 {
		f.mu.Lock()
		f.taken[key] = n
		f.mu.Unlock()
	}
}

// statusWriter remembers the status a Responder wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Hijack lets a Responder drop the connection through the wrapper.
func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return w.ResponseWriter.(http.Hijacker).Hijack()
}

// Count is the number of requests received.
func (f *Fake) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sendCount
}

// Requests returns the requests received (the first 1000).
func (f *Fake) Requests() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.requests...)
}

// Respond replaces the answer; nil restores acceptance.
func (f *Fake) Respond(r Responder) {
	f.mu.Lock()
	f.respond = r
	f.mu.Unlock()
}

// Delay makes every answer wait d.
func (f *Fake) Delay(d time.Duration) {
	f.mu.Lock()
	f.delay = d
	f.mu.Unlock()
}

// ID is the provider id the fake gives the nth message.
func (f *Fake) ID(n int) string {
	if f.Kind == "mailgun" {
		return fmt.Sprintf("<fake-%d@mg.fake.test>", n)
	}
	return fmt.Sprintf("fake-%s-%d", f.Kind, n)
}

// Accept writes the provider's documented success answer.
func (f *Fake) Accept(w http.ResponseWriter, n int) {
	id := f.ID(n)
	switch f.Kind {
	case "mailgun":
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "message": "Queued. Thank you."})
	case "sendgrid":
		w.Header().Set("X-Message-Id", id)
		w.WriteHeader(http.StatusAccepted)
	case "resend":
		writeJSON(w, http.StatusOK, map[string]string{"id": id})
	case "ses":
		writeJSON(w, http.StatusOK, map[string]string{"MessageId": id})
	}
}

// Reject answers with status and the provider's error shape carrying msg;
// headers are set first (key, value, ...).
func (f *Fake) Reject(status int, msg string, headers ...string) Responder {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		switch f.Kind {
		case "mailgun":
			writeJSON(w, status, map[string]string{"message": msg})
		case "sendgrid":
			writeJSON(w, status, map[string]any{"errors": []map[string]any{{"message": msg, "field": nil, "help": nil}}})
		case "resend":
			writeJSON(w, status, map[string]any{"statusCode": status, "message": msg, "name": "validation_error"})
		case "ses":
			code := map[int]string{400: "MessageRejected", 403: "AccessDeniedException",
				429: "TooManyRequestsException", 503: "ServiceUnavailable"}[status]
			switch {
			case code != "":
			case status >= 500:
				code = "InternalFailure"
			default:
				code = "BadRequestException"
			}
			if w.Header().Get("X-Amzn-ErrorType") == "" {
				w.Header().Set("X-Amzn-ErrorType", code)
			}
			writeJSON(w, status, map[string]string{"message": msg})
		}
	}
}

// Drop closes the connection after reading the request, without an answer.
func Drop(w http.ResponseWriter, _ *http.Request, _ int) {
	c, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		c.Close()
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
