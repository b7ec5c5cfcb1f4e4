package throttle

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
)

// downThrottle is a backend that cannot be reached.
type downThrottle struct{}

var errDown = &UnavailableError{Backend: "redis", Err: errors.New("connection refused")}

func (downThrottle) Reserve(context.Context, Request) (Ticket, error) { return nil, errDown }
func (downThrottle) State(context.Context, string, Override) (Snapshot, error) {
	return Snapshot{}, errDown
}
func (downThrottle) Close(context.Context) error { return nil }

func TestFailOpenAdmitsAndCounts(t *testing.T) {
	f := NewFailOpen(downThrottle{}, nil)
	for i := range 3 {
		tk, err := f.Reserve(context.Background(), Request{Inbox: "a", Lease: time.Second})
		if err != nil {
			t.Fatalf("send %d: %v, want admitted", i, err)
		}
		snap, err := tk.Commit(context.Background())
		if err != nil || len(limited(snap)) != 0 {
			t.Fatalf("Commit = %+v, %v; want no limited window and no error", snap, err)
		}
	}
	if got := f.Unthrottled(); got != 3 {
		t.Errorf("Unthrottled() = %d, want 3", got)
	}
	if _, err := f.State(context.Background(), "", Override{}); !errors.Is(err, errDown) {
		t.Errorf("State: %v, want the backend's error", err)
	}
}

// A caller that gave up is not admitted unthrottled: it takes nothing and
// sends nothing (issue 15, item 5).
func TestFailOpenRefusesAGoneCaller(t *testing.T) {
	f := NewFailOpen(downThrottle{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if tk, err := f.Reserve(ctx, Request{Lease: time.Second}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Reserve for a cancelled caller = %v, %v; want context.Canceled", tk, err)
	}
	if f.Unthrottled() != 0 {
		t.Errorf("a cancelled caller counted as sent unthrottled")
	}
}

func TestFailOpenPassesRefusals(t *testing.T) {
	f := NewFailOpen(NewMemory(newLimiter(1, 0), clock.NewSystem()), nil)
	if _, err := f.Reserve(context.Background(), Request{Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	var rl *RateLimitedError
	if _, err := f.Reserve(context.Background(), Request{Lease: time.Second}); !errors.As(err, &rl) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if f.Unthrottled() != 0 {
		t.Errorf("a refusal counted as unthrottled")
	}
}

func limited(s Snapshot) []WindowState {
	var out []WindowState
	for _, w := range s.States() {
		if w.Limit > 0 {
			out = append(out, w)
		}
	}
	return out
}
