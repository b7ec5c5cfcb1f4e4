package api

import (
	"sync"
	"time"
)

// authFailureWindow is how long a failed API key attempt counts.
const authFailureWindow = 15 * time.Minute

// maxAuthClients bounds the addresses remembered; beyond it the entries
// with the oldest failures are dropped first.
const maxAuthClients = 10000

// authFailures counts failed API key attempts per client address, so that
// guessing the key costs AUTH_FAILURE_LIMIT tries per 15 minutes per
// address. It is safe for concurrent use; a nil *authFailures never blocks.
type authFailures struct {
	limit int

	mu      sync.Mutex
	clients map[string][]time.Time // failure times, oldest first
}

func newAuthFailures(limit int) *authFailures {
	if limit <= 0 {
		return nil
	}
	return &authFailures{limit: limit, clients: make(map[string][]time.Time)}
}

// blocked reports whether addr has failed limit times in the window ending
// at now, and when its oldest counted failure leaves the window.
func (f *authFailures) blocked(addr string, now time.Time) (bool, time.Duration) {
	if f == nil {
		return false, 0
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	times := f.live(addr, now)
	if len(times) < f.limit {
		return false, 0
	}
	return true, times[len(times)-f.limit].Add(authFailureWindow).Sub(now)
}

// fail records one failure of addr at now, and reports whether it is the
// one that blocks addr.
func (f *authFailures) fail(addr string, now time.Time) (blocked bool) {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	times := f.live(addr, now)
	if len(times) == 0 && len(f.clients) >= maxAuthClients {
		f.evict(now)
	}
	already := len(times) >= f.limit
	if already {
		times = times[1:] // only the last limit failures matter
	}
	f.clients[addr] = append(times, now)
	return !already && len(times)+1 == f.limit
}

// live drops addr's failures older than the window; f.mu is held.
func (f *authFailures) live(addr string, now time.Time) []time.Time {
	times := f.clients[addr]
	i := 0
	for i < len(times) && now.Sub(times[i]) >= authFailureWindow {
		i++
	}
	if i == len(times) {
		delete(f.clients, addr)
		return nil
	}
	times = times[i:]
	f.clients[addr] = times
	return times
}

// evict forgets expired entries, then the one whose last failure is oldest.
func (f *authFailures) evict(now time.Time) {
	var oldest string
	var at time.Time
	for addr, times := range f.clients {
		last := times[len(times)-1]
		if now.Sub(last) >= authFailureWindow {
			delete(f.clients, addr)
			continue
		}
		if oldest == "" || last.Before(at) {
			oldest, at = addr, last
		}
	}
	if len(f.clients) >= maxAuthClients {
		delete(f.clients, oldest)
	}
}
