package skuld

import (
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
)

// Outcomes of a send, as an Observer is told them.
const (
	OutcomeSent    = "sent"    // the provider accepted the message
	OutcomeFailed  = "failed"  // it certainly did not go out
	OutcomeUnknown = "unknown" // it was handed over and no verdict came back
)

// Observer is told what the send pipeline does, so that it can be counted
// (internal/metrics implements it with Prometheus) without skuld knowing
// how. Its methods are called from many goroutines at once and must be
// quick; they must not block a send.
type Observer interface {
	// ProviderCall reports one provider attempt: its outcome and how long
	// the provider took. A send that is retried makes several calls.
	ProviderCall(provider, outcome string, d time.Duration)
	// SendFinished reports a send's final outcome, once per admitted
	// send, with the failure's cause (providers.Cause; "" when sent).
	SendFinished(provider, outcome, cause string)
	// Retried reports a retry after a temporary failure.
	Retried(provider string)
	// Refused reports a send refused by the throttle, with the full
	// windows.
	Refused(windows []throttle.Window)
}

// NopObserver observes nothing; it is the default.
type NopObserver struct{}

// ProviderCall implements Observer.
func (NopObserver) ProviderCall(string, string, time.Duration) {}

// SendFinished implements Observer.
func (NopObserver) SendFinished(string, string, string) {}

// Retried implements Observer.
func (NopObserver) Retried(string) {}

// Refused implements Observer.
func (NopObserver) Refused([]throttle.Window) {}

// Observers tells each of os what one Observer is told, in order.
func Observers(os ...Observer) Observer { return observers(os) }

type observers []Observer

func (os observers) ProviderCall(provider, outcome string, d time.Duration) {
	for _, o := range os {
		o.ProviderCall(provider, outcome, d)
	}
}

func (os observers) SendFinished(provider, outcome, cause string) {
	for _, o := range os {
		o.SendFinished(provider, outcome, cause)
	}
}

func (os observers) Retried(provider string) {
	for _, o := range os {
		o.Retried(provider)
	}
}

func (os observers) Refused(windows []throttle.Window) {
	for _, o := range os {
		o.Refused(windows)
	}
}
