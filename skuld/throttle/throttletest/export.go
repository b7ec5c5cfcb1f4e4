package throttletest

import (
	"testing"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// The suite's helpers, for the cases a throttle implementation keeps of its
// own (package shared's): each fails the test on what it does not expect.

// Lease is the lease every case's send asks for.
const Lease = lease

// Reserve admits one send from inbox ("" for none).
func Reserve(t *testing.T, th throttle.Throttle, inbox string) throttle.Ticket {
	t.Helper()
	return reserve(t, th, inbox)
}

// Refused checks that a send from inbox is refused by exactly windows,
// with a Retry-After and a snapshot that agree.
func Refused(t *testing.T, th throttle.Throttle, inbox string, windows ...throttle.Window) *throttle.RateLimitedError {
	t.Helper()
	return refused(t, th, inbox, windows...)
}

// Commit commits tk.
func Commit(t *testing.T, tk throttle.Ticket) throttle.Snapshot {
	t.Helper()
	return commit(t, tk)
}

// State reads the global windows, or inbox's when inbox is not "".
func State(t *testing.T, th throttle.Throttle, inbox string) throttle.ScopeState {
	t.Helper()
	return state(t, th, inbox)
}

// Stop closes th, as a server stopping.
func Stop(t *testing.T, th throttle.Throttle) {
	t.Helper()
	stop(t, th)
}

// HammerThrough makes n concurrent admissions (inbox(i) for the i-th),
// commits the admitted, and returns how many were, and the admissions
// that failed as unavailable.
func HammerThrough(t *testing.T, th throttle.Throttle, n int, inbox func(int) string) (admitted int, unavailable []error) {
	t.Helper()
	return hammerThrough(t, th, n, inbox)
}
