package skuld

import (
	"context"
	"fmt"
	"time"
)

// enter registers a send of a message of at most size bytes, unless
// shutdown has begun; it ends by the end of its lease counted from now.
func (s *Sender) enter(size int) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return 0, false
	}
	s.next++
	s.ends[s.next] = s.o.Clock.Mono() + s.o.Budget.Lease(size)
	s.inFlight.Add(1)
	return s.next, true
}

func (s *Sender) leave(id uint64) {
	s.mu.Lock()
	delete(s.ends, id)
	s.mu.Unlock()
	s.inFlight.Done()
}

// ShuttingDown reports whether Shutdown has begun: a held-mail job that
// waits in its run for a window leaves instead.
func (s *Sender) ShuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// InFlight returns the number of sends under way.
func (s *Sender) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ends)
}

// LongestLeaseLeft is how long the sends under way may still take: each
// ends by the end of its lease, so a drain that waits this long abandons
// none of them.
func (s *Sender) LongestLeaseLeft() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, longest := s.o.Clock.Mono(), time.Duration(0)
	for _, end := range s.ends {
		longest = max(longest, end-now)
	}
	return longest
}

// Shutdown refuses new sends and waits until every send in flight has been
// recorded, or ctx ends. It is safe to call more than once.
func (s *Sender) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inFlight.Wait(); close(done) }()
	// New sends are refused from here on: the refusals counted so far are
	// all there will be. stop writes their summary and stops its timer; it
	// is a no-op on the second call.
	defer s.refusals.stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("skuld: sends still in flight: %w", ctx.Err())
	}
}
