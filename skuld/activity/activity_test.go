package activity

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/store"
)

// fakeStore keeps what it was given, and fails while down.
type fakeStore struct {
	mu   sync.Mutex
	down bool
	got  map[string]int64 // "minute kind" → n
}

func (f *fakeStore) AddSendCounts(_ context.Context, ts []store.Tally) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("database down")
	}
	for _, t := range ts {
		f.got[t.Minute.Format("15:04")+" "+t.Kind] += t.N
	}
	return nil
}

// Counts go to their minute of the clock; a flush that fails keeps them
// for the next, and nothing is added twice.
func TestCounterFlushesByMinuteAndKeepsWhatFailed(t *testing.T) {
	st := &fakeStore{got: map[string]int64{}}
	clk := clocktest.New(time.Date(2026, 11, 27, 10, 0, 30, 0, time.UTC))
	c := New(st, clk)
	var wg sync.WaitGroup
	for range 100 {
		wg.Go(func() { c.SendFinished("smtp", "sent", "") })
	}
	wg.Wait()
	c.Add(Throttled)
	c.Refused(nil) // the throttle's refusal may still be queued: the API counts refusals
	clk.Advance(time.Minute)
	c.SendFinished("smtp", "failed", "timeout")
	st.down = true
	if err := c.Flush(context.Background()); err == nil {
		t.Fatal("Flush to a database that is down answered nil")
	}
	st.down = false
	c.Add(Validation)
	if err := c.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(context.Background()); err != nil { // nothing left: adds nothing
		t.Fatal(err)
	}
	want := map[string]int64{"10:00 sent": 100, "10:00 throttled": 1, "10:01 failed": 1, "10:01 validation": 1}
	if len(st.got) != len(want) {
		t.Errorf("got %v, want %v", st.got, want)
	}
	for k, n := range want {
		if st.got[k] != n {
			t.Errorf("%s: got %d, want %d (all: %v)", k, st.got[k], n, st.got)
		}
	}
	if !slices.Equal(Reasons, []string{"throttled", "domain_blocked", "suppressed", "validation"}) {
		t.Errorf("Reasons = %v", Reasons)
	}
}
