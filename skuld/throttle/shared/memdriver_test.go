package shared_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/skuld/throttle"
	td "github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// memDriver is a throttledriver.Driver in memory, on a test's clock: the
// backend Shared's own cases run over. It follows the contract as the real
// drivers do, which TestMemDriver checks with their suite.
type memDriver struct {
	clock clock.Clock // the backend's: Advance moves a *clocktest.Clock

	mu      sync.Mutex
	present bool
	missing string // a part found missing: the state is incomplete
	// settleFails makes the next settlements apply and then fail, as a
	// call that timed out after the backend took it.
	settleFails int
	seq         int64
	scopes      map[string]*memScope // "" is the global scope
	held        chan struct{}        // closed when a stall ends; nil when none
}

// memScope is one scope's buckets (by window, then index) and flights.
type memScope struct {
	buckets [4]map[int64]int // second (100 ms), minute (1 s), hour (1 min), day (15 min)
	flights map[int64]*td.Flight
}

var widths = [4]int64{int64(100 * time.Millisecond), int64(time.Second), int64(time.Minute), int64(15 * time.Minute)}
var spans = [4]int64{int64(time.Second), int64(time.Minute), int64(time.Hour), int64(24 * time.Hour)}

func newMemDriver(c clock.Clock) *memDriver {
	return &memDriver{clock: c, scopes: map[string]*memScope{}}
}

func (d *memDriver) Name() string { return "memory-driver" }

// Advance lets dur pass on the clock, the backend's too.
func (d *memDriver) Advance(dur time.Duration) {
	d.clock.(*clocktest.Clock).Advance(dur)
}

// Stall makes the backend answer nothing until resume, as a slow network
// does.
func (d *memDriver) Stall() (resume func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held == nil {
		d.held = make(chan struct{})
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.held != nil {
			close(d.held)
			d.held = nil
		}
	}
}

// Lose makes the whole state vanish.
func (d *memDriver) Lose(*testing.T) {
	d.mu.Lock()
	d.present, d.scopes = false, map[string]*memScope{}
	d.mu.Unlock()
}

// LosePart makes a part of the state vanish, as a deleted key: the state
// is incomplete until restored.
func (d *memDriver) LosePart(part string) {
	d.mu.Lock()
	d.missing = part
	d.mu.Unlock()
}

// lock waits out a stall and takes d.mu; it returns the backend's now.
func (d *memDriver) lock(ctx context.Context) (int64, error) {
	for {
		d.mu.Lock()
		held := d.held
		if held == nil {
			return d.clock.Now().UnixNano(), nil
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-held:
		}
	}
}

func (d *memDriver) scope(name string) *memScope {
	s := d.scopes[name]
	if s == nil {
		s = &memScope{buckets: [4]map[int64]int{{}, {}, {}, {}}, flights: map[int64]*td.Flight{}}
		d.scopes[name] = s
	}
	return s
}

func (s *memScope) countAt(at int64) {
	for i, w := range widths {
		s.buckets[i][floorDiv(at, w)]++
	}
}

// counted is the sends and slots in flight in window i at now.
func (s *memScope) counted(i int, now int64) int {
	n, lo := 0, floorDiv(now-spans[i], widths[i])
	for b, c := range s.buckets[i] {
		if b >= lo {
			n += c
		}
	}
	for _, f := range s.flights {
		n += f.N
	}
	return n
}

func (s *memScope) lacks(lim throttle.Limits, now int64, n int) bool {
	for i, l := range [4]int{lim.PerSecond, lim.PerMinute, lim.PerHour, lim.PerDay} {
		if l > 0 && s.counted(i, now)+n > l {
			return true
		}
	}
	return false
}

func (s *memScope) raw(now int64) *td.RawScope {
	r := &td.RawScope{}
	for i, dst := range [4]*[]td.Bucket{&r.Second, &r.Minute, &r.Hour, &r.Day} {
		lo := floorDiv(now-spans[i], widths[i])
		for _, b := range slices.Sorted(maps.Keys(s.buckets[i])) {
			if b >= lo {
				*dst = append(*dst, td.Bucket{Index: b, Sends: s.buckets[i][b]})
			}
		}
	}
	for _, id := range slices.Sorted(maps.Keys(s.flights)) {
		r.Flights = append(r.Flights, *s.flights[id])
	}
	return r
}

// open takes d.mu (see lock) for a call that needs the state whole: lost
// or incomplete, it lets go and says so.
func (d *memDriver) open(ctx context.Context) (int64, error) {
	now, err := d.lock(ctx)
	if err != nil {
		return 0, err
	}
	switch {
	case !d.present:
		err = td.ErrStateLost
	case d.missing != "":
		err = &td.IncompleteError{Part: d.missing}
	}
	if err != nil {
		d.mu.Unlock()
		return 0, err
	}
	return now, nil
}

func (d *memDriver) Reserve(ctx context.Context, global throttle.Limits, asks []td.Ask) (*td.Batch, error) {
	now, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	for _, s := range d.scopes { // past their deadline: sends at the deadline
		for id, f := range s.flights {
			if f.Deadline <= now {
				for range f.N {
					s.countAt(f.Deadline)
				}
				delete(s.flights, id)
			}
		}
	}
	g := d.scope("")
	b := &td.Batch{Raw: td.Raw{Now: now, Global: *g.raw(now), Inbox: map[string]*td.RawScope{}}}
	for _, a := range asks {
		n := a.Slots()
		var in *memScope
		if a.Inbox != "" {
			in = d.scope(a.Inbox)
			if b.Inbox[a.Inbox] == nil {
				b.Inbox[a.Inbox] = in.raw(now)
			}
		}
		inbox := a.Limits
		inbox.PerSecond = 0 // an inbox has no second window
		if g.lacks(global, now, n) || in != nil && in.lacks(inbox, now, n) {
			b.Verdicts = append(b.Verdicts, td.Verdict{})
			continue
		}
		d.seq++
		for _, s := range []*memScope{g, in} {
			if s != nil {
				s.flights[d.seq] = &td.Flight{ID: d.seq, Deadline: now + int64(a.Lease), N: n}
			}
		}
		b.Verdicts = append(b.Verdicts, td.Verdict{Admitted: true, ID: d.seq})
	}
	return b, nil
}

func (d *memDriver) Settle(ctx context.Context, ss []td.Settlement) (err error) {
	now, err := d.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	if !d.present || d.missing != "" {
		return nil // the rebuild counts these from the send record
	}
	if d.settleFails > 0 {
		d.settleFails--
		defer func() { err = errors.New("memdriver: timed out after applying the settlements") }()
	}
	for _, x := range ss {
		scopes := []*memScope{d.scope("")}
		if x.Inbox != "" {
			scopes = append(scopes, d.scope(x.Inbox))
		}
		for _, s := range scopes {
			if f := s.flights[x.ID]; f != nil {
				if f.N--; f.N == 0 {
					delete(s.flights, x.ID)
				}
			}
			if x.Commit {
				s.countAt(now - int64(x.Age))
			}
		}
	}
	return nil
}

func (d *memDriver) Read(ctx context.Context, inbox string) (*td.Raw, error) {
	now, err := d.open(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	raw := &td.Raw{Now: now, Global: *d.scope("").raw(now), Inbox: map[string]*td.RawScope{}}
	if inbox != "" {
		raw.Inbox[inbox] = d.scope(inbox).raw(now)
	}
	return raw, nil
}

func (d *memDriver) Restore(ctx context.Context, rec td.Record, replace bool) (bool, error) {
	if _, err := d.lock(ctx); err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	if d.present && d.missing == "" && !replace {
		return false, nil
	}
	d.missing = ""
	d.scopes = map[string]*memScope{}
	for _, s := range rec.Sent {
		d.scope("").countAt(s.At.UnixNano())
		if s.Inbox != "" {
			d.scope(s.Inbox).countAt(s.At.UnixNano())
		}
	}
	for _, p := range rec.Pending {
		d.seq++
		f := td.Flight{ID: d.seq, Deadline: p.Deadline.UnixNano(), N: 1}
		d.scope("").flights[d.seq] = &f
		if p.Inbox != "" {
			g := f
			d.scope(p.Inbox).flights[d.seq] = &g
		}
	}
	d.present = true
	return true, nil
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
