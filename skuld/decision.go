package skuld

import (
	"encoding/json"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// Decision is what the throttle decided for a send, recorded with its
// message for the dashboard as JSON: the refusal that queued it
// (messages.throttle_refusal) and the windows when its slot was settled
// (throttle_admission).
type Decision struct {
	At time.Time `json:"at"`
	// Cost is the units the send weighs in each window: 1, or its
	// recipients (THROTTLE_UNIT=recipient).
	Cost int `json:"cost"`
	// Full names the windows a refusal found full, and RetryAfter is the
	// Retry-After it gave, in seconds; both empty for an admission.
	Full       []string `json:"full,omitempty"`
	RetryAfter int      `json:"retry_after,omitempty"`
	// Windows are the windows then, in throttle.Windows' order.
	Windows []DecisionWindow `json:"windows"`
}

// DecisionWindow is one window in a Decision.
type DecisionWindow struct {
	Window       string `json:"window"` // throttle.Window's name: "per-minute", "inbox-per-hour", …
	Limit        int    `json:"limit"`  // 0 = unlimited
	Used         int    `json:"used"`
	InFlight     int    `json:"in_flight"`
	ResetSeconds int    `json:"reset_seconds"`
}

// refusalDecision is the Decision of a refusal of a send of cost units.
func refusalDecision(at time.Time, cost int, rl *throttle.RateLimitedError) Decision {
	d := Decision{At: at, Cost: cost, RetryAfter: rl.RetryAfterSeconds(), Windows: decisionWindows(rl.Snapshot)}
	for _, w := range rl.Windows() {
		d.Full = append(d.Full, w.String())
	}
	return d
}

// decisionWindows lists snap's windows.
func decisionWindows(snap throttle.Snapshot) []DecisionWindow {
	states := snap.States()
	out := make([]DecisionWindow, len(states))
	for i, st := range states {
		out[i] = DecisionWindow{Window: st.Window.String(), Limit: st.Limit, Used: st.Used, InFlight: st.InFlight,
			ResetSeconds: st.ResetSeconds}
	}
	return out
}

// decisionJSON is d as the message records it.
func decisionJSON(d Decision) *string {
	b, err := json.Marshal(d)
	if err != nil {
		return nil // a Decision always encodes
	}
	s := string(b)
	return &s
}
