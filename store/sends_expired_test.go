package store

import (
	"context"
	"testing"
	"time"
)

func TestResolveExpiredSends(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		dead := sendWithSlot(t, s, in, 0, 30*time.Second)         // its server died: deadline t0+30s
		live := sendWithSlot(t, s, in, 50*time.Second, time.Hour) // another server's, still in flight

		n, err := s.ResolveExpiredSends(ctx, t0.Add(time.Minute), t0.Add(time.Minute), nil)
		if err != nil || n != 1 {
			t.Fatalf("ResolveExpiredSends: got (%d, %v), want (1, nil)", n, err)
		}
		if got, want := counted(t, s, t0.Add(-time.Hour)), "["+t0.Add(30*time.Second).String()+"]"; got != want {
			t.Errorf("counted: got %v, want %v (the dead send, at its deadline)", got, want)
		}
		m, err := s.Message(ctx, dead.ID)
		if err != nil || m.Status != StatusFailed || m.Error == nil || *m.Error != interruptedError {
			t.Errorf("dead send's message: got %+v, %v, want failed, %q", m, err, interruptedError)
		}
		if m, err := s.Message(ctx, live.ID); err != nil || m.Status != StatusSending {
			t.Errorf("live send's message: got %v, %v, want still sending", m.Status, err)
		}
		if n, err := s.ResolveExpiredSends(ctx, t0.Add(time.Minute), t0.Add(time.Minute), nil); err != nil || n != 0 {
			t.Errorf("again: got (%d, %v), want (0, nil)", n, err)
		}
	})
}
