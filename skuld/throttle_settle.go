package skuld

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A shared backend's commits and releases far from every limit are
// gathered for a few milliseconds and sent together: one statement or
// script settles many sends, where one each cost as much as the admission.
// Each commit is counted at the moment it was made (the backend is told how
// long ago, on this server's monotonic clock), so gathering delays only
// when other servers see it: until then it counts as in flight, which takes
// the same room. Near a limit each goes at once, so that a refusal's
// Retry-After, which assumes a send in flight may still go out at its
// deadline, is not made late by a send that has finished: when its
// admission found a window at 80% or more, and for hotFor after this server
// saw such an admission or a refusal (a send admitted early may finish
// after the window filled). A server's own
// reads send what it holds first; on shutdown it sends the rest (Flush); a
// server killed with commits pending leaves their reservations to be
// counted at their deadlines, as after any crash.

// settleDelay is how long commits and releases are gathered, by default.
const settleDelay = 10 * time.Millisecond

// hotFor is how long after an admission near a limit, or a refusal, every
// commit and release goes at once.
const hotFor = 2 * time.Second

// settled is one commit or release waiting to be sent.
type settled struct {
	id      int64
	inboxID string
	commit  bool
	at      int64 // local ns (settles.now) when it was made
	ttl     int64 // Redis: how long the inbox's keys must outlive it, ms
}

// settles gathers one backend's commits and releases.
type settles struct {
	delay  time.Duration
	start  time.Time
	offset func() time.Duration // the tests' clock offset, or nil
	// send settles batch on the backend; now is the local time of the
	// call, so that now-at is each commit's age.
	send func(ctx context.Context, now int64, batch []settled) error

	hotUntil atomic.Int64 // local ns; see hotFor

	mu        sync.Mutex
	pending   []settled
	scheduled bool
}

// saw records an admission (nil: a refusal). After a refusal, or one near
// a limit, every commit and release goes at once for hotFor.
func (s *settles) saw(a *admission) {
	if a == nil || a.nearLimit() {
		s.hotUntil.Store(s.now() + int64(hotFor))
	}
}

// hot reports whether an admission near a limit or a refusal was seen in
// the last hotFor.
func (s *settles) hot() bool { return s.now() < s.hotUntil.Load() }

func newSettles(delay time.Duration, offset func() time.Duration,
	send func(ctx context.Context, now int64, batch []settled) error) *settles {
	if delay <= 0 {
		delay = settleDelay
	}
	return &settles{delay: delay, start: time.Now(), offset: offset, send: send}
}

// now is this server's monotonic clock, plus the tests' offset, in ns.
func (s *settles) now() int64 {
	n := int64(time.Since(s.start))
	if s.offset != nil {
		n += int64(s.offset())
	}
	return n
}

// settle queues x and sends the queue at once if near (x's admission was
// near a limit) or hot, else within the delay.
func (s *settles) settle(ctx context.Context, x settled, near bool) error {
	x.at = s.now()
	now := near || s.hot()
	s.mu.Lock()
	s.pending = append(s.pending, x)
	if !now {
		s.schedule(s.delay)
	}
	s.mu.Unlock()
	if now {
		return s.flush(ctx)
	}
	return nil
}

// schedule sends what is pending after d unless a flush takes it first;
// s.mu is held.
func (s *settles) schedule(d time.Duration) {
	if s.scheduled {
		return
	}
	s.scheduled = true
	time.AfterFunc(d, func() {
		s.mu.Lock()
		s.scheduled = false
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if s.flush(ctx) != nil {
			// The backend is unreachable: try again in a second; the
			// reservations count meanwhile, and are reclaimed at their
			// deadlines if this server dies first.
			s.mu.Lock()
			s.schedule(time.Second)
			s.mu.Unlock()
		}
	})
}

// flush sends what is pending. What a failed call took is put back:
// settling twice is harmless, the second finds no reservation to remove.
func (s *settles) flush(ctx context.Context) error {
	_, err := s.flushed(ctx)
	return err
}

// flushed is flush, reporting whether there was anything to send.
func (s *settles) flushed(ctx context.Context) (bool, error) {
	s.mu.Lock()
	batch := s.pending
	s.pending = nil
	s.mu.Unlock()
	if len(batch) == 0 {
		return false, nil
	}
	err := s.send(ctx, s.now(), batch)
	if err != nil {
		s.mu.Lock()
		s.pending = append(batch, s.pending...)
		s.mu.Unlock()
	}
	return true, err
}
