package skuld

import (
	"context"
	"log/slog"
	"sync"

	"golang.org/x/sync/semaphore"
)

// gateAll is the weight a deletion takes of an inbox's gate: more than any
// number of sends can hold at once.
const gateAll = 1 << 40

// inboxGates orders the sends of an inbox with its deletion, on this
// server, without polling the database (which orders them across servers:
// store.DeleteInbox). A send holds its inbox's gate from loading the inbox until its
// outcome is recorded; a deletion waits until no send holds it and keeps
// new ones out while it deletes (a send that comes after a deletion began
// waits behind it, then finds no inbox). So a send and
// the deletion of its inbox end one of two ways: the send is recorded
// first and the deletion then removes it with the inbox, or the deletion
// comes first and the send is refused, not found, with nothing sent. A
// message answered 201 was recorded whole, never cut off between the
// provider and its record. The zero value is ready; it is safe for
// concurrent use.
type inboxGates struct {
	mu sync.Mutex
	m  map[string]*inboxGate // inboxes with a send or deletion holding or waiting
}

type inboxGate struct {
	sem   *semaphore.Weighted
	users int
	// closing is open while a deletion waits for the gate or holds it:
	// a send that comes meanwhile waits for it to close, outside sem.
	closing chan struct{}
}

// take takes n of the gate of inbox id (gateAll: for a deletion), waiting
// until ctx ends; release gives it back. A deletion is registered before
// it waits: every send that comes after take was called waits behind it.
// waiting, when not nil, is called once the deletion is registered, if
// sends hold the gate.
func (g *inboxGates) take(ctx context.Context, id string, n int64, waiting func()) (release func(), err error) {
	g.mu.Lock()
	for {
		if g.m == nil {
			g.m = map[string]*inboxGate{}
		}
		ig := g.m[id]
		if ig == nil {
			ig = &inboxGate{sem: semaphore.NewWeighted(gateAll)}
			g.m[id] = ig
		}
		if ch := ig.closing; ch != nil {
			g.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			g.mu.Lock()
			continue
		}
		busy := ig.users > 0
		ig.users++
		if n == gateAll {
			ig.closing = make(chan struct{})
		}
		g.mu.Unlock()
		if busy && waiting != nil && n == gateAll {
			waiting()
		}
		if err := ig.sem.Acquire(ctx, n); err != nil {
			g.leave(id, ig, n)
			return nil, err
		}
		return func() { ig.sem.Release(n); g.leave(id, ig, n) }, nil
	}
}

// leave forgets a gate nobody holds or waits for, so the map holds only
// inboxes with a send under way, and ends a deletion's closing.
func (g *inboxGates) leave(id string, ig *inboxGate, n int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n == gateAll {
		close(ig.closing)
		ig.closing = nil
	}
	if ig.users--; ig.users == 0 {
		delete(g.m, id)
	}
}

// sending holds the gate of inbox id for one send; it waits only behind a
// deletion of the inbox.
func (s *Sender) sending(ctx context.Context, id string) (release func(), err error) {
	return s.gates.take(ctx, id, 1, nil)
}

// CloseInbox waits until no send from inbox id is under way on this server
// and keeps new ones waiting until reopen is called: the caller deletes
// the inbox in between, and the sends that waited then find no inbox (404,
// nothing sent). It fails only with ctx's error. The database orders the
// deletion with the sends of other servers sharing it (store.DeleteInbox
// looks at their sends in flight until there is none); the gate is what
// wakes a deletion the moment this server's last send is recorded, where
// looking again would wait out an interval (BENCHMARKS.md, section 17).
func (s *Sender) CloseInbox(ctx context.Context, id string) (reopen func(), err error) {
	return s.gates.take(ctx, id, gateAll, func() {
		s.o.Logger.InfoContext(ctx, "inbox deletion waits for its sends in flight", slog.String("inbox_id", id))
	})
}
