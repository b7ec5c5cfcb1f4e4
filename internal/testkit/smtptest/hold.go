package smtptest

import "sync"

// Hold is a stall at one stage that lasts until the test says: a session
// that reaches the stage waits there until Release (or the server stops).
// With it a test orders the server's progress with its own steps without
// a timer: it learns from Reached that a client is inside the stage, does
// what must happen meanwhile, then releases it.
type Hold struct {
	reached     chan struct{}
	release     chan struct{}
	reachOnce   sync.Once
	releaseOnce sync.Once
}

// HoldAt makes every following session wait at stage until the returned
// Hold is released.
func (s *Server) HoldAt(stage Stage) *Hold {
	h := &Hold{reached: make(chan struct{}), release: make(chan struct{})}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stages[stage] = stageAction{hold: h}
	return h
}

// Reached is closed once a session has reached the stage.
func (h *Hold) Reached() <-chan struct{} { return h.reached }

// Release lets every session waiting at the stage, and every later one,
// go on. It is safe to call twice.
func (h *Hold) Release() { h.releaseOnce.Do(func() { close(h.release) }) }

func (h *Hold) arrive() { h.reachOnce.Do(func() { close(h.reached) }) }
