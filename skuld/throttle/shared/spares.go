package shared

import (
	"context"
	"sync"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// Spare admissions take the backend's round trip off most sends far from
// every limit. When a batch goes to the backend for an inbox (or for none),
// it also asks for a block of spare slots of the same kind: one
// reservation of several slots, judged by the backend whole, with a lease
// longer by spareHold. For spareHold the server admits the next sends of
// that kind from the block's slots without asking the backend, each
// committed or released as any send is; what it has not used by then it
// gives back. A block is a reservation like any other: the windows count
// its slots as in flight until each is committed or released, every server
// sees them so, and a server that dies holding a block has its slots
// counted at the deadline, as after any crash. So the promise does not move; what
// spares cost is room held for a second, which is why they are taken only
// far from the limits: at most one in spareShare of a window's room, none
// once a window is near its limit (the hot rule), and those held are given
// back when it gets there.
const (
	spareHold   = time.Second
	maxSpares   = 64 // slots per call, per kind of send
	spareShare  = 32 // a call's spares take at most 1/spareShare of the room
	spareDemand = 32 // and at most this many per caller of the call
	maxRooms    = 4096
)

// spareKey is a kind of send: its inbox, and the limits it was judged by.
// A spare serves only sends judged by the same limits, so that a PATCH of
// an inbox's limits, or new global ones, applies from the next send on.
type spareKey struct {
	inbox  string
	limits throttle.Limits // the inbox's
	global throttle.Limits
}

// block is a spare admission of several slots: one reservation in the
// backend, handed out a slot at a time.
type block struct {
	t     *ticket       // the admission: its view, its ask and its reservation
	left  int           // slots not handed out yet
	lease time.Duration // margin and spareHold included
	asked time.Duration // local mono when the call that made it was sent
}

// spares holds a shared throttle's spare admissions, and the room each kind
// of send had at its last call. Its goroutine gives back the slots not
// used within spareHold; started by newSpares, stopped by close.
type spares struct {
	s *Throttle

	mu    sync.Mutex
	held  map[spareKey][]*block
	rooms map[spareKey]int
	off   bool // closed: no more are kept

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newSpares(s *Throttle) *spares {
	p := &spares{s: s, held: map[spareKey][]*block{}, rooms: map[spareKey]int{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// want is how many spare slots to ask of the backend, as one block, for a
// call that carries callers sends of kind k.
func (p *spares) want(k spareKey, callers int) int {
	if p.s.hot() {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off || len(p.held[k]) > 0 {
		return 0
	}
	room, ok := p.rooms[k]
	if !ok {
		return 0 // the first call of a kind learns its room
	}
	return min(maxSpares, spareDemand*callers, room/spareShare)
}

// learned records the room a kind of send had after a call: the least
// room of its limited windows, or -1 for none limited.
func (p *spares) learned(k spareKey, room int) {
	if room < 0 {
		room = spareShare * maxSpares
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.rooms) >= maxRooms {
		clear(p.rooms)
	}
	p.rooms[k] = room
}

// keep holds b for kind k and reports whether it did: not when spares are
// off or a window is near its limit, and then the caller gives b back.
func (p *spares) keep(k spareKey, b *block) bool {
	p.mu.Lock()
	if p.off || p.s.hot() {
		p.mu.Unlock()
		return false
	}
	p.held[k] = append(p.held[k], b)
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// take returns a slot of kind k for a send whose lease (margin included)
// is lease, or nil. Blocks of k too old to use are given back.
func (p *spares) take(k spareKey, lease time.Duration) *ticket {
	now := p.s.clock.Mono()
	p.mu.Lock()
	list := p.held[k]
	var stale []*block
	for len(list) > 0 && now-list[0].asked >= spareHold {
		stale = append(stale, list[0])
		list = list[1:]
	}
	var t *ticket
	if len(list) > 0 && lease+now-list[0].asked <= list[0].lease {
		b := list[0]
		t = &ticket{s: b.t.s, v: b.t.v, k: b.t.k, id: b.t.id, near: b.t.near}
		b.left--
		if b.left == 0 {
			list = list[1:]
		}
	}
	if len(list) == 0 {
		delete(p.held, k)
	} else {
		p.held[k] = list
	}
	p.mu.Unlock()
	p.give(stale) // found before the goroutine did (a test's clock moved)
	return t
}

// mine adds the slots held to m, as given back: this server's own reads
// do not count room it holds as taken.
func (p *spares) mine(m locals) locals {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.held) == 0 {
		return m
	}
	if m == nil {
		m = make(locals, len(p.held))
	}
	for _, list := range p.held {
		for _, b := range list {
			for range b.left {
				m[b.t.id] = append(m[b.t.id], local{})
			}
		}
	}
	return m
}

// drain gives back every slot held: a window is near its limit, the limits
// changed, or the state was lost.
func (p *spares) drain() {
	p.mu.Lock()
	all := p.takeAll(func(*block) bool { return true })
	p.mu.Unlock()
	p.give(all)
}

// takeAll removes and returns the blocks for which stale is true; p.mu is
// held.
func (p *spares) takeAll(stale func(*block) bool) []*block {
	var out []*block
	for k, list := range p.held {
		i := 0
		for i < len(list) && stale(list[i]) {
			i++
		}
		out = append(out, list[:i]...)
		if i == len(list) {
			delete(p.held, k)
		} else {
			p.held[k] = list[i:]
		}
	}
	return out
}

// give releases the slots left in blocks through the gatherer, as soon as
// it sends: a slot given back is room another server may need.
func (p *spares) give(blocks []*block) {
	for _, b := range blocks {
		ask := b.t.v.asks[b.t.k]
		s := throttledriver.Settlement{ID: b.t.id, Inbox: ask.Inbox, Lease: ask.Lease}
		for range b.left {
			_ = p.s.gather.add(context.Background(), p.s.clock.Mono(), false, s)
		}
	}
}

// run gives back the slots not used within spareHold, until close.
func (p *spares) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for {
			p.mu.Lock()
			now := p.s.clock.Mono()
			stale := p.takeAll(func(b *block) bool { return now-b.asked >= spareHold })
			next := time.Duration(-1)
			for _, list := range p.held {
				if d := list[0].asked + spareHold - now; next < 0 || d < next {
					next = d
				}
			}
			p.mu.Unlock()
			p.give(stale)
			if next < 0 {
				break
			}
			select {
			case <-p.stop:
				return
			case <-time.After(max(next, time.Millisecond)):
			}
		}
	}
}

// close stops the goroutine and gives back what is held; no slot is kept
// after it.
func (p *spares) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.off = true
	p.mu.Unlock()
	p.drain() // Close flushes the gatherer next
}
