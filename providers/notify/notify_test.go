package notify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/nornweave/nornweave/providers/notify"
)

// A receiver verifies with the spec's own library, with either secret
// during a rotation; a byte of the body changed is refused.
func TestSignerVerifiesWithTheSpecsLibrary(t *testing.T) {
	old, err := notify.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	fresh, _ := notify.NewSecret()
	s, err := notify.NewSigner(fresh, old)
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"message.sent","timestamp":"2026-11-27T01:00:00Z","data":{"id":"m1"}}`)
	h, err := s.Headers("msg_2Kx", time.Now(), body)
	if err != nil {
		t.Fatal(err)
	}
	if sigs := strings.Fields(h.Get("webhook-signature")); len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") {
		t.Fatalf("webhook-signature = %q, want two v1 signatures", h.Get("webhook-signature"))
	}
	for name, secret := range map[string]string{"new": fresh, "old": old} {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		if err := wh.Verify(body, h); err != nil {
			t.Errorf("a receiver with the %s secret: %v", name, err)
		}
		tampered := append([]byte(nil), body...)
		tampered[10] ^= 1
		if err := wh.Verify(tampered, h); !errors.Is(err, standardwebhooks.ErrNoMatchingSignature) {
			t.Errorf("a tampered body with the %s secret: %v, want no matching signature", name, err)
		}
	}
	other, _ := notify.NewSecret()
	if wh, _ := standardwebhooks.NewWebhook(other); wh.Verify(body, h) == nil {
		t.Error("a third secret verified it")
	}
}

// The spec's library signs with an empty key; we do not.
func TestNewSignerRefusesWeakSecrets(t *testing.T) {
	for _, bad := range []string{"", "whsec_", "whsec_c2hvcnQ=", "not-base64", "c2VjcmV0c2VjcmV0c2VjcmV0"} {
		if _, err := notify.NewSigner(bad); err == nil {
			t.Errorf("NewSigner(%q) accepted", bad)
		}
	}
	if _, err := notify.NewSigner(); err == nil {
		t.Error("NewSigner() without a secret accepted")
	}
}

// receiver is an endpoint on loopback answering with respond, counting
// the requests and connections it gets.
type receiver struct {
	*httptest.Server
	requests, conns atomic.Int64
	mu              sync.Mutex
	last            *http.Request
	body            []byte
}

func newReceiver(t *testing.T, respond http.HandlerFunc) *receiver {
	r := &receiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.requests.Add(1)
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.last, r.body = req, b
		r.mu.Unlock()
		respond(w, req)
	}))
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			r.conns.Add(1)
		}
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

// open is a Guard for the tests' loopback receivers.
var open = notify.Guard{AllowHTTP: true, AllowPrivate: true}

func TestDeliverSortsAnswers(t *testing.T) {
	t.Parallel()
	redirected := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {})
	tests := []struct {
		name    string
		respond http.HandlerFunc
		want    notify.Outcome
		status  int
		after   time.Duration
	}{
		{"200", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }, notify.Delivered, 200, 0},
		{"204", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }, notify.Delivered, 204, 0},
		{"500", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(500) }, notify.Retry, 500, 0},
		{"429 Retry-After: 2", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
		}, notify.Snooze, 429, 2 * time.Second},
		{"503 Retry-After a day: an hour at most", func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Retry-After", "86400")
			w.WriteHeader(503)
		}, notify.Snooze, 503, time.Hour},
		{"429 without Retry-After", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(429) }, notify.Retry, 429, 0},
		{"410", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(410) }, notify.Gone, 410, 0},
		{"302 is not followed", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, redirected.URL, http.StatusFound)
		}, notify.Retry, 302, 0},
	}
	c := notify.NewClient(notify.Options{Guard: open})
	defer c.Close()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rcv := newReceiver(t, tt.respond)
			h := http.Header{"Webhook-Id": {"msg_1"}}
			r := c.Deliver(context.Background(), rcv.URL+"/hook", h, []byte(`{"type":"message.sent"}`))
			if r.Outcome != tt.want || r.Status != tt.status || r.RetryAfter != tt.after || r.Latency <= 0 {
				t.Errorf("Deliver = %+v, want outcome %v, status %d, retry after %v", r, tt.want, tt.status, tt.after)
			}
			if got := rcv.last.Header.Get("Webhook-Id"); got != "msg_1" || string(rcv.body) != `{"type":"message.sent"}` {
				t.Errorf("received %q with webhook-id %q", rcv.body, got)
			}
		})
	}
	if n := redirected.requests.Load(); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

// What the endpoint answered is kept for the log, at most 1 KiB, as text.
func TestDeliverKeepsAKiBOfTheAnswer(t *testing.T) {
	rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(500)
		fmt.Fprint(w, strings.Repeat("é", 2000))
	})
	r := notify.NewClient(notify.Options{Guard: open}).Deliver(context.Background(), rcv.URL, http.Header{}, nil)
	if len(r.Body) > 1024+2 || !strings.HasPrefix(r.Body, "éé") {
		t.Errorf("kept %d bytes: %.20q", len(r.Body), r.Body)
	}
}

// An endpoint that does not answer in time is a Retry, not a hang.
func TestDeliverTimesOut(t *testing.T) {
	block := make(chan struct{})
	rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) { <-block })
	defer close(block)
	c := notify.NewClient(notify.Options{Guard: open, Timeout: 200 * time.Millisecond})
	if r := c.Deliver(context.Background(), rcv.URL, http.Header{}, nil); r.Outcome != notify.Retry || r.Err == nil {
		t.Errorf("Deliver = %+v, want a Retry with the timeout", r)
	}
}

// resolver answers from a map, as the tests' DNS would.
type resolver map[string][]netip.Addr

func (r resolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	if a, ok := r[host]; ok {
		return a, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// With the guard on (the default), every target in the operator's own
// network is refused when it is registered and again when it is dialled,
// and none is ever dialled: the loopback receiver sees no connection, and
// the dialer's hook no address.
func TestGuardRefusesTheOperatorsNetwork(t *testing.T) {
	t.Parallel()
	rcv := newReceiver(t, func(w http.ResponseWriter, _ *http.Request) {})
	port := rcv.Listener.Addr().(*net.TCPAddr).Port
	names := resolver{"internal.example.test": {netip.MustParseAddr("127.0.0.1")},
		"rebind.example.test": {netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("10.1.2.3")}}
	var dialed atomic.Int64
	guard := notify.Guard{AllowHTTP: true} // http on, private off: what is tested is the address
	c := notify.NewClient(notify.Options{Guard: guard, Dialed: func(string) { dialed.Add(1) }})
	targets := []string{
		fmt.Sprintf("http://127.0.0.1:%d/hook", port),
		fmt.Sprintf("http://[::1]:%d/hook", port),
		fmt.Sprintf("http://localhost:%d/hook", port),
		fmt.Sprintf("http://[::ffff:127.0.0.1]:%d/hook", port),
		"http://10.0.0.1/hook",
		"http://169.254.169.254/latest/meta-data/",
		"http://100.64.0.1/hook",
		"http://0.0.0.0/hook",
		"http://[fe80::1]/hook",
		"http://224.0.0.1/hook",
	}
	for _, u := range targets {
		if err := guard.CheckURL(context.Background(), u, net.DefaultResolver); !errors.Is(err, notify.ErrForbiddenTarget) {
			t.Errorf("CheckURL(%s) = %v, want refused", u, err)
		}
		if r := c.Deliver(context.Background(), u, http.Header{}, nil); r.Outcome != notify.Refused {
			t.Errorf("Deliver(%s) = %+v, want Refused", u, r)
		}
	}
	for _, host := range []string{"internal.example.test", "rebind.example.test"} {
		if err := guard.CheckURL(context.Background(), "http://"+host+"/hook", names); !errors.Is(err, notify.ErrForbiddenTarget) {
			t.Errorf("CheckURL(%s, which resolves to a private address) = %v, want refused", host, err)
		}
	}
	if n := dialed.Load(); n != 0 {
		t.Errorf("%d connections were attempted past the guard", n)
	}
	if n := rcv.conns.Load(); n != 0 {
		t.Errorf("the loopback receiver got %d connections", n)
	}
	// The default Guard: https only.
	if err := (notify.Guard{}).CheckURL(context.Background(), "http://93.184.216.34/hook", names); !errors.Is(err, notify.ErrForbiddenTarget) {
		t.Errorf("an http URL with the default guard: %v, want refused", err)
	}
	if err := (notify.Guard{}).CheckURL(context.Background(), "https://user:pw@93.184.216.34/hook", names); !errors.Is(err, notify.ErrForbiddenTarget) {
		t.Errorf("a URL with a password: %v, want refused", err)
	}
	if err := (notify.Guard{}).CheckURL(context.Background(), "https://93.184.216.34/hook", names); err != nil {
		t.Errorf("a public https URL: %v", err)
	}
}

// The retry schedule: at once, then 5 s, 5 min, 30 min, 2 h, 5 h, 10 h,
// 10 h, each within 10 %; nothing after the eighth attempt.
func TestNextAttemptFollowsTheSchedule(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	want := []time.Duration{5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour}
	for i, w := range want {
		for range 100 {
			d, ok := notify.DefaultSchedule.Next(i+1, r)
			if !ok || d < w*9/10 || d > w*11/10 {
				t.Fatalf("after attempt %d: %v, %v; want about %v", i+1, d, ok, w)
			}
		}
	}
	if _, ok := notify.DefaultSchedule.Next(len(notify.DefaultSchedule), r); ok {
		t.Error("an attempt after the last")
	}
}
