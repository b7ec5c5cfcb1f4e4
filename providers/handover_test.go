package providers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// recorder is a HandoverTrace that records its calls in order.
type recorder struct {
	mu    sync.Mutex
	calls []string
	fail  error // returned by HandedOver
	seen  chan string
}

func newRecorder() *recorder { return &recorder{seen: make(chan string, 4)} }

func (r *recorder) trace() *HandoverTrace {
	note := func(s string) {
		r.mu.Lock()
		r.calls = append(r.calls, s)
		r.mu.Unlock()
		r.seen <- s
	}
	return &HandoverTrace{Waiting: func() { note("waiting") },
		HandedOver: func() error { note("handed over"); return r.fail }}
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// TestHandoverTraceEveryProvider: SMTP's connection slots and the HTTP
// providers' concurrency slots tell the trace the same things. A send with
// a free slot is only handed over; one that must wait says so first, and
// is handed over once it holds the slot; a hand-over that cannot be
// recorded stops the send, not sent, with its slot given back.
func TestHandoverTraceEveryProvider(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	smtp := newTestSMTP(t, mx, func(c *SMTPConfig) { c.MaxConns = 1 })
	httpb, err := newHTTPBase("test", "TEST_KEY", HTTPConfig{MaxConcurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []struct {
		name     string
		acquire  func(context.Context) error
		release  func()
		slots    chan struct{}
		provider string
	}{
		{"smtp", smtp.acquire, smtp.release, smtp.slots, "smtp"},
		{"http", httpb.acquire, func() { <-httpb.slots }, httpb.slots, "test"},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			r := newRecorder()
			if err := k.acquire(WithHandoverTrace(context.Background(), r.trace())); err != nil {
				t.Fatal(err)
			}
			if got, want := r.got(), []string{"handed over"}; !slices.Equal(got, want) {
				t.Errorf("a free slot: got %q, want %q", got, want)
			}

			w := newRecorder()
			done := make(chan error, 1)
			go func() { done <- k.acquire(WithHandoverTrace(context.Background(), w.trace())) }()
			<-w.seen
			if got, want := w.got(), []string{"waiting"}; !slices.Equal(got, want) {
				t.Errorf("a busy slot: got %q, want %q", got, want)
			}
			k.release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got, want := w.got(), []string{"waiting", "handed over"}; !slices.Equal(got, want) {
				t.Errorf("once the slot is free: got %q, want %q", got, want)
			}
			k.release()

			f := newRecorder()
			f.fail = errors.New("database gone")
			err := k.acquire(WithHandoverTrace(context.Background(), f.trace()))
			var se *SendError
			if !errors.As(err, &se) || !se.Temporary || se.Unknown || se.Error() != k.provider+": not sent: its hand-over to the provider could not be recorded" {
				t.Errorf("a hand-over not recorded: got %v, want a temporary SendError, not sent", err)
			}
			if n := len(k.slots); n != 0 {
				t.Errorf("after a hand-over not recorded: %d slots held, want 0", n)
			}
		})
	}
}
