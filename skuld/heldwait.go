package skuld

import (
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// heldRecheck is how often held mail asks the throttle again while room
// may appear at any moment: a full window holds sends in flight, and one
// that fails gives its slot back at once. It bounds how late a queued
// lane's next message goes out after such a release makes room (the
// README's second: half of it here, so that the dispatch that follows the
// answer fits in the other half). A lane asks within its job (package
// hold), without a round trip through River.
const heldRecheck = 500 * time.Millisecond

// HeldWait is how long held mail waits after the refusal rl before it asks
// again: until the earliest moment room may appear in every full window
// (rl.RoomAfter, exact: when the committed sends have left), or, when a
// send in flight that fails would make room, heldRecheck. It never waits
// for rl.RetryAfter, which assumes each send in flight commits at the end
// of its lease and counts a window from then: a client told Retry-After
// errs late, the safe side; mail the server holds asks again as soon as
// it may be admitted. A send queued on its refusal is first tried then,
// and package hold's jobs wait as long after each refusal.
func HeldWait(rl *throttle.RateLimitedError) time.Duration {
	if rl.RoomAfter > 0 {
		return rl.RoomAfter
	}
	return heldRecheck
}
