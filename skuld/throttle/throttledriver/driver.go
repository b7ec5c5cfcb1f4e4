// Package throttledriver is the interface between the shared throttle
// (package shared) and the backends that keep its state: PostgreSQL
// (pgthrottle) and Redis (redisthrottle). It holds the Driver contract and
// its raw types only; drivertest is the conformance suite every driver runs.
package throttledriver

import (
	"context"
	"errors"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// A Driver is where a shared throttle (shared.Throttle) keeps its state:
// PostgreSQL (pgthrottle) or Redis (redisthrottle). It stores raw state — the sends
// counted per bucket of each window (100 ms buckets for the second, 1 s for
// the minute, 1 min for the hour, 15 min for the day; bucket index =
// floor(ns / width)) and the reservations in flight
// with their deadlines — stamped by the backend's own clock, in ns since
// the Unix epoch, so that every server reads one clock. Each method is one
// atomic step on the backend.
//
// A driver judges an admission by every window of the global scope (the
// limits given to Reserve: second, minute, hour, day) and of the ask's
// inbox (Ask.Limits: minute, hour, day; an inbox has no second), each by
// the window rule of the ring buckets
// (a bucket b of width w counts while b >= floor((now-span)/w); a window
// counts its sends plus the slots of the reservations in flight, and admits
// an ask of n slots when that count plus n stays within a non-zero limit;
// a reservation past its deadline counts as a send per slot at its
// deadline). An ask is one send (one slot) or a block of spare admissions
// (several): admitted whole or refused. It does nothing else: batching,
// gathering commits, Retry-After, the headers and recovery are the shared
// throttle's, the same for every driver, and every number is computed from
// the raw state the driver returns, read in the snapshot that judged.
type Driver interface {
	// Name is the backend's name, "postgres" or "redis".
	Name() string
	// Reserve admits asks in order, as if one at a time, atomically:
	// it counts the reservations past their deadline at their deadlines
	// in every window, reads the global scope and each ask's inbox scope,
	// judges each ask by every window of global and of the ask's own
	// limits, and reserves the admitted ones
	// until now+Lease. It returns what it read before admitting the first
	// (Batch.Raw; an inbox's scope as it was when the first ask of that
	// inbox was judged) and a verdict per ask. Asks of one inbox are
	// adjacent. ErrStateLost means the state has vanished, whole or in
	// part (an *IncompleteError): a driver checks that every part of each
	// scope it touches is there.
	Reserve(ctx context.Context, global throttle.Limits, asks []Ask) (*Batch, error)
	// Settle commits and releases reservations; a state lost or
	// incomplete takes none (it will be rebuilt from the send record,
	// which holds them). A commit counts at
	// now-Age in every window of the global scope and the inbox's, even when its
	// reservation is gone (reclaimed, or lost with the state): counting
	// twice errs on the safe side, not counting does not.
	Settle(ctx context.Context, s []Settlement) error
	// Read returns the global scope and inbox's ("" for none) in one
	// snapshot, changing nothing but the record of a part found missing.
	// ErrStateLost means the state vanished, whole or in part.
	Read(ctx context.Context, inbox string) (*Raw, error)
	// Restore writes rec as the whole state (each Sent in every window of
	// its scopes) and marks the state present.
	// Unless replace is set it does so only if the state is lost or
	// incomplete, and
	// reports whether it did: of several servers that found it lost, one
	// rebuilds it.
	Restore(ctx context.Context, rec Record, replace bool) (bool, error)
}

// ErrStateLost is a backend whose state has vanished (a Redis flushed, or
// restarted without persistence; tables emptied by hand). The shared
// throttle rebuilds it from the durable send record before it admits
// anything.
var ErrStateLost = errors.New("throttle: shared state lost")

// IncompleteError is a backend whose state is there only in part: one of
// its keys or tables was deleted, truncated or evicted, which would
// otherwise read as "no sends" and let the limits be exceeded. It is
// ErrStateLost (errors.Is), and rebuilt the same way; Part names what was
// found missing.
type IncompleteError struct{ Part string }

func (e *IncompleteError) Error() string {
	return "throttle: shared state incomplete, missing " + e.Part
}

// Is makes an incomplete state a lost one.
func (e *IncompleteError) Is(target error) bool { return target == ErrStateLost }

// Ask is one admission as a driver judges it.
type Ask struct {
	Inbox  string          // "" for none
	Limits throttle.Limits // the inbox's limits in force
	Lease  time.Duration   // margin included
	N      int             // slots: 0 or 1 for one send, more for a block of spares
}

// Slots is the number of slots a asks for: at least one.
func (a Ask) Slots() int { return max(a.N, 1) }

// Raw is a backend's state at Now: the global scope and some inboxes'.
type Raw struct {
	Now    int64 // ns since the Unix epoch, on the backend's clock
	Global RawScope
	Inbox  map[string]*RawScope
}

// RawScope is one scope's raw state: the sends counted per bucket of each
// window, and the reservations. A bucket may appear twice; a driver may
// return buckets already out of their window, which the rule skips.
type RawScope struct {
	Second []Bucket // 100 ms buckets
	Minute []Bucket // 1 s buckets
	Hour   []Bucket // 1 min buckets
	Day    []Bucket // 15 min buckets
	// Flights are the reservations in flight (or past their deadline).
	Flights []Flight
}

// Bucket is the sends counted in one bucket of a window.
type Bucket struct {
	Index int64
	Sends int
}

// Flight is one reservation: its id, its deadline (ns), and the slots it
// still holds (at least one; each settlement takes one).
type Flight struct {
	ID, Deadline int64
	N            int
}

// Batch is what Reserve answers: the state it read and a verdict per ask.
type Batch struct {
	Raw
	Verdicts []Verdict
}

// Verdict is one ask's answer: admitted, with the reservation's id.
type Verdict struct {
	Admitted bool
	ID       int64
}

// Settlement is one commit or release of one slot of reservation ID; a
// reservation whose slots are all settled is gone.
type Settlement struct {
	ID     int64
	Inbox  string
	Commit bool
	// Age is how long ago, on this server's clock, the send was committed:
	// it counts at that moment, not when the settlement reaches the
	// backend.
	Age time.Duration
	// Lease is the reservation's, margin included: a backend that lets an
	// idle inbox's state expire keeps it at least this long.
	Lease time.Duration
}

// Record is the durable send record a lost state is rebuilt from: the
// sends counted within throttle.Longest (the day and its last bucket) and
// those still in flight.
type Record struct {
	Sent    []Sent
	Pending []Pending
}

// Sent is a send that counts from At.
type Sent struct {
	Inbox string
	At    time.Time
}

// Pending is a send in flight until Deadline (margin included).
type Pending struct {
	Inbox    string
	Deadline time.Time
}
