package skuld

import (
	"context"
	"errors"
	"testing"
	"time"
)

// downThrottle is a backend that cannot be reached.
type downThrottle struct{}

var errDown = &UnavailableError{Backend: "redis", Err: errors.New("connection refused")}

func (downThrottle) ReserveInbox(context.Context, time.Duration, string, Override) (Ticket, error) {
	return nil, errDown
}
func (downThrottle) State(context.Context) (State, error) { return State{}, errDown }
func (downThrottle) InboxState(context.Context, string, Override) (State, error) {
	return State{}, errDown
}
func (downThrottle) States(context.Context, string, Override) (State, State, error) {
	return State{}, State{}, errDown
}
func (downThrottle) InboxVersion(context.Context) (string, error) { return "", errDown }
func (downThrottle) InboxesChanged(context.Context) error         { return errDown }

func TestFailOpenAdmitsAndCounts(t *testing.T) {
	f := NewFailOpen(downThrottle{}, nil)
	for i := range 3 {
		tk, err := f.ReserveInbox(context.Background(), time.Second, "a", Override{})
		if err != nil {
			t.Fatalf("send %d: %v, want admitted", i, err)
		}
		if err := tk.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Unthrottled(); got != 3 {
		t.Errorf("Unthrottled() = %d, want 3", got)
	}
	if _, err := f.State(context.Background()); !errors.Is(err, errDown) {
		t.Errorf("State: %v, want the backend's error", err)
	}
}

func TestFailOpenPassesRefusals(t *testing.T) {
	l := NewGlobalRateLimiter(1, 0)
	f := NewFailOpen(NewMemoryThrottle(l, NewSystemClock()), nil)
	if _, err := f.ReserveInbox(context.Background(), time.Second, "", Override{}); err != nil {
		t.Fatal(err)
	}
	var rl *RateLimitedError
	if _, err := f.ReserveInbox(context.Background(), time.Second, "", Override{}); !errors.As(err, &rl) {
		t.Fatalf("got %v, want a refusal", err)
	}
	if f.Unthrottled() != 0 {
		t.Errorf("a refusal counted as unthrottled")
	}
}
