package throttle

import "time"

// ring is one sliding window: a ring of buckets of committed sends plus a
// count of reservations in flight. Bucket b covers [b*width, (b+1)*width) in
// nanoseconds and counts until (b+1)*width+span <= now. This is the window
// rule; the shared backends' SQL and Lua admit by the same one, and their
// state is read back into rings, so every number a client sees comes from
// here.
//
// A bucket counts until all of it is older than the window, so at any
// instant span/width+1 buckets are alive (61 for the minute: its 60 whole
// widths plus the partly expired oldest one). The ring has the next power
// of two of slots (see spanOf), which makes the slot of bucket b a mask
// instead of a division.
type ring struct {
	limit    int
	width    int64 // bucket width, ns
	span     int64 // window length, ns
	lo       int64 // oldest bucket that can still count; only moves forward
	next     int64 // when lo next moves: expiry(lo)
	used     int   // sum of the live slots' counts
	inFlight int
	slots    []slot
}

// slot holds one bucket. A slot whose idx is below lo is stale and is reused
// for whichever newer bucket maps to it.
type slot struct {
	idx   int64
	count int
}

func (w *ring) init(limit int, s Span) {
	w.limit = limit
	w.width = int64(s.bucket())
	w.span = int64(s.Duration())
	w.slots = make([]slot, spanOf[s].ring)
	w.lo = -1 << 63
	w.next = -1 << 63 // the first call sets lo
}

// advance drops the buckets that lie wholly outside the window at now. It
// does work only when lo moves, once per bucket width at most, so the usual
// call is a single compare.
func (w *ring) advance(now int64) {
	if now < w.next {
		return
	}
	lo := floorDiv(now-w.span, w.width)
	for i := range w.slots {
		if s := &w.slots[i]; s.count > 0 && s.idx < lo {
			w.used -= s.count
			s.count = 0
		}
	}
	w.lo = lo
	w.next = w.expiry(lo)
}

// add counts n sends in bucket b; advance must have run. A bucket after
// now's (a shared backend's clock stepped back since it was written) counts
// as now's: the sends in it were made no later than now in real time, so
// they still leave no sooner than they should. Live buckets span
// [lo, lo+span/width], fewer than the ring's slots, so a slot holding
// another bucket is always a stale one whose count advance has already
// dropped.
func (w *ring) add(now, b int64, n int) {
	b = min(b, floorDiv(now, w.width))
	if b < w.lo || n <= 0 {
		return // already wholly outside the window
	}
	s := &w.slots[b&int64(len(w.slots)-1)]
	if s.idx != b {
		s.idx, s.count = b, 0
	}
	s.count += n
	w.used += n
}

func (w *ring) counted() int { return w.used + w.inFlight }

func (w *ring) full() bool { return w.limit > 0 && w.counted() >= w.limit }

// lacks reports a limited window without room for n more sends: full for
// n = 1.
func (w *ring) lacks(n int) bool { return w.limit > 0 && w.counted()+n > w.limit }

func (w *ring) expiry(b int64) int64 { return (b+1)*w.width + w.span }

// wait returns the nanoseconds from now until need counted sends have left
// the window, oldest first. late holds, ascending, the moment each
// reservation in flight commits at the latest, with its weight; it is
// assumed to commit then and to leave with that moment's bucket.
func (w *ring) wait(now int64, need int, late []lateSend) int64 {
	freed, i := 0, 0
	for b := w.lo; b < w.lo+int64(len(w.slots)); b++ {
		s := &w.slots[b&int64(len(w.slots)-1)]
		if s.idx != b || s.count == 0 {
			continue
		}
		// In-flight sends that leave before this bucket do so first.
		for ; i < len(late) && w.expiry(floorDiv(late[i].at, w.width)) <= w.expiry(b); i++ {
			if freed += late[i].n; freed >= need {
				return w.expiry(floorDiv(late[i].at, w.width)) - now
			}
		}
		if freed += s.count; freed >= need {
			return w.expiry(b) - now
		}
	}
	for ; i < len(late); i++ {
		if freed += late[i].n; freed >= need {
			return w.expiry(floorDiv(late[i].at, w.width)) - now
		}
	}
	return 0 // fewer counted than need: nothing to wait for
}

// retryAfter is wait for a window without room for n: enough sends must
// leave to bring the count to limit-n.
func (w *ring) retryAfter(now int64, n int, late []lateSend) int64 {
	return w.wait(now, w.counted()+n-w.limit, late)
}

// roomAfter is the nanoseconds from now until a window without room for n
// may have it: until enough committed sends have left it, if every send
// in flight were given back at once; 0 if giving them back would be
// enough.
func (w *ring) roomAfter(now int64, n int) int64 {
	need := w.used + n - w.limit
	if need <= 0 {
		return 0
	}
	return w.wait(now, need, nil)
}

func (w *ring) state(now int64, late []lateSend, win Window) WindowState {
	st := WindowState{Window: win, Limit: w.limit, Used: w.used, InFlight: w.inFlight}
	if w.limit > 0 {
		st.Remaining = max(0, w.limit-w.counted())
	}
	switch {
	case w.full():
		st.ResetSeconds = ceilSeconds(w.retryAfter(now, 1, late))
	case w.used > 0:
		st.ResetSeconds = ceilSeconds(w.wait(now, 1, late[:0]))
	}
	return st
}

// floorDiv divides rounding towards minus infinity, so bucket indexes stay
// consistent for times before 1970 as well.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// ceilSeconds rounds nanoseconds up to whole seconds, at least 1.
func ceilSeconds(ns int64) int {
	s := (ns + int64(time.Second) - 1) / int64(time.Second)
	return int(max(s, 1))
}
