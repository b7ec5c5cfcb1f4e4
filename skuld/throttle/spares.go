package throttle

import (
	"context"
	"sync"
	"time"
)

// Spare admissions take the backend's round trip off most sends far from
// every limit. When a batch goes to the backend for an inbox (or for none),
// it asks for a few more admissions of the same kind than its callers need,
// judged by the backend like any other, each with a lease longer by
// spareHold. For spareHold the server admits the next sends of that kind
// from these spares without asking the backend; what it has not used by
// then it gives back. A spare is a reservation like any other: the windows
// count it as in flight until it is committed or released, every server
// sees it so, and a server that dies holding spares has them counted at
// their deadlines, as after any crash. So the promise does not move; what
// spares cost is room held for a second, which is why they are taken only
// far from the limits: at most one in spareShare of a window's room, none
// once a window is near its limit (the hot rule), and those held are given
// back when it gets there.
const (
	spareHold   = time.Second
	maxSpares   = 32 // per call, per kind of send
	spareShare  = 32 // a call's spares take at most 1/spareShare of the room
	spareDemand = 16 // and at most this many per caller of the call
	maxRooms    = 4096
)

// spareKey is a kind of send: its inbox, and the limits it was judged by.
// A spare serves only sends judged by the same limits, so that a PATCH of
// an inbox's limits, or new global ones, applies from the next send on.
type spareKey struct {
	inbox  string
	limits Limits // the inbox's
	global Limits
}

type spare struct {
	t     *sharedTicket
	lease time.Duration // margin and spareHold included
	asked time.Duration // local mono when the call that made it was sent
}

// spares holds a Shared throttle's spare admissions, and the room each kind
// of send had at its last call. Its goroutine gives back the spares not
// used within spareHold; started by newSpares, stopped by close.
type spares struct {
	s *Shared

	mu    sync.Mutex
	held  map[spareKey][]spare
	n     int
	rooms map[spareKey]int
	off   bool // closed: no more are kept

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

func newSpares(s *Shared) *spares {
	p := &spares{s: s, held: map[spareKey][]spare{}, rooms: map[spareKey]int{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go p.run()
	return p
}

// want is how many spares to ask of the backend for a call that carries
// callers sends of kind k.
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

// put keeps sp, a spare of kind k, unless a window got near its limit in
// the call that made it.
func (p *spares) put(k spareKey, sp spare) {
	p.mu.Lock()
	if !p.off && !p.s.hot() {
		p.held[k] = append(p.held[k], sp)
		p.n++
		p.mu.Unlock()
		select {
		case p.wake <- struct{}{}:
		default:
		}
		return
	}
	p.mu.Unlock()
	p.give([]spare{sp})
}

// take returns a spare of kind k for a send whose lease (margin included)
// is lease, or nil. Spares of k too old to use are given back.
func (p *spares) take(k spareKey, lease time.Duration) *sharedTicket {
	now := p.s.clock.Mono()
	p.mu.Lock()
	list := p.held[k]
	var stale []spare
	for len(list) > 0 && now-list[0].asked >= spareHold {
		stale = append(stale, list[0])
		list = list[1:]
	}
	var t *sharedTicket
	if len(list) > 0 && lease+now-list[0].asked <= list[0].lease {
		t, list = list[0].t, list[1:]
	}
	p.n -= len(stale)
	if t != nil {
		p.n--
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

// mine adds the spares held to m, as given back: this server's own reads
// do not count room it holds as taken.
func (p *spares) mine(m map[int64]local) map[int64]local {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 {
		return m
	}
	if m == nil {
		m = make(map[int64]local, p.n)
	}
	for _, list := range p.held {
		for _, sp := range list {
			m[sp.t.id] = local{}
		}
	}
	return m
}

// drain gives back every spare held: a window is near its limit, the
// limits changed, or the state was rebuilt.
func (p *spares) drain() {
	p.mu.Lock()
	all := p.takeAll(func(spare) bool { return true })
	p.mu.Unlock()
	p.give(all)
}

// takeAll removes and returns the spares for which stale is true; p.mu is
// held.
func (p *spares) takeAll(stale func(spare) bool) []spare {
	var out []spare
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
	p.n -= len(out)
	return out
}

// give releases spares through the gatherer, as soon as it sends: a
// spare given back is room another server may need.
func (p *spares) give(list []spare) {
	for _, sp := range list {
		ask := sp.t.v.asks[sp.t.k]
		s := Settlement{ID: sp.t.id, Inbox: ask.Inbox, Lease: ask.Lease}
		_ = p.s.gather.add(context.Background(), s, p.s.clock.Mono(), false)
	}
}

// run gives back the spares not used within spareHold, until close.
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
			stale := p.takeAll(func(sp spare) bool { return now-sp.asked >= spareHold })
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

// close stops the goroutine and gives back what is held; no spare is kept
// after it.
func (p *spares) close() {
	close(p.stop)
	<-p.done
	p.mu.Lock()
	p.off = true
	all := p.takeAll(func(spare) bool { return true })
	p.mu.Unlock()
	p.give(all) // Close flushes the gatherer next
}

// roomLeft is the least room of the limited windows of g and in (nil for
// none), or -1 if none is limited.
func roomLeft(g, in *scope) int {
	room := -1
	for _, s := range [2]*scope{g, in} {
		if s == nil {
			continue
		}
		for _, r := range [2]*ring{&s.minute, &s.hour} {
			if r.limit > 0 && (room < 0 || r.limit-r.counted() < room) {
				room = max(r.limit-r.counted(), 0)
			}
		}
	}
	return room
}
