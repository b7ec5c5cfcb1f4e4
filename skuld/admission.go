package skuld

import (
	"context"
	"fmt"
	"time"

	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// A held message (scheduled, or queued when throttled) is recorded when it
// is accepted, and sent later by package hold's jobs. Its send takes the
// steps of a direct send in the Sender, which owns the filter, the
// throttle, the provider and the drain: AdmitHeld (the domain filter and the
// suppression list, then a slot in the throttle), Admission.Deliver (the provider, with retries),
// Release or Conclude (the slot settled by the provider's answer), and Done
// once the outcome is recorded. Package hold claims and records the
// message around them.

// Admission is the send of a held message that the domain filter and the
// throttle admitted: its slot is reserved in its windows, and the Sender
// counts it in flight (Shutdown waits for it). Release or Conclude settles
// the slot, once; Done ends the send. An Admission is used by one
// goroutine.
type Admission struct {
	s     *Sender
	m     *store.Message
	inbox *store.Inbox
	id    uint64 // the send's registration (enter)
	tk    throttle.Ticket
	lease time.Duration
	cost  int           // the units its slot holds
	end   time.Duration // mono: the end of its lease
	// attempts counts Deliver's provider calls.
	attempts int
	// leaveGate gives back the inbox's gate, held from Deliver until Done.
	leaveGate func()
}

// AdmitHeld admits the send of held message m, recorded already, from
// inbox to req's recipients: the domain filter as it is now, then a slot in
// the throttle's windows for m's size. Errors: *BlockedError (the filter
// now refuses a recipient), *SuppressedError (a recipient is now on the
// suppression list), ErrShuttingDown, *throttle.RateLimitedError
// (the windows are full: nothing taken), *throttle.TooLargeError (a limit
// was lowered below its cost), or the throttle's failure to answer.
func (s *Sender) AdmitHeld(ctx context.Context, m *store.Message, inbox *store.Inbox, req SendRequest) (*Admission, error) {
	if err := s.screen(ctx, req); err != nil {
		return nil, err
	}
	id, ok := s.enter(m.Size)
	if !ok {
		return nil, ErrShuttingDown
	}
	lease := s.o.Budget.Lease(m.Size)
	reserved := s.o.Clock.Mono()
	cost := s.cost(req)
	tk, err := s.o.Throttle.Reserve(ctx, throttle.Request{Inbox: InboxKey(inbox), Override: InboxOverride(inbox), Lease: lease, Cost: cost})
	if err != nil {
		s.leave(id)
		return nil, err
	}
	return &Admission{s: s, m: m, inbox: inbox, id: id, tk: tk, lease: lease, cost: cost, end: reserved + lease}, nil
}

// Deliver hands the admitted message, with req's recipients and
// attachments, to the provider, retrying temporary failures within its
// lease, and returns the provider's id for it or its failure. It finishes
// even if ctx is canceled: the send, once claimed, must be recorded. It
// first takes the inbox's gate against its deletion, held until Done.
//
// claim is called with the send's slot once the provider has a connection
// for the message, just before its bytes go, and again before each retry's:
// held mail claims its message there (store.ClaimHeld), so that a server
// that dies while the message waits for a connection has claimed nothing.
// A claim that fails stops the send, nothing sent: the failure wraps its
// error. It is a callback because the claim must happen at that moment,
// inside the provider's call.
func (a *Admission) Deliver(ctx context.Context, req SendRequest, claim func(*store.SendSlot) error) (providerID string, err error) {
	s := a.s
	ctx = context.WithoutCancel(ctx)
	// Without a cancellation, the gate fails only if its ctx does: never.
	if a.leaveGate, err = s.sending(ctx, a.inbox.ID); err != nil {
		return "", err
	}
	at := s.o.Clock.Now().UTC()
	slot := &store.SendSlot{Scope: InboxKey(a.inbox), ReservedAt: at, Deadline: at.Add(a.lease), Cost: a.cost}
	handover := &providers.HandoverTrace{HandedOver: func() error {
		if err := claim(slot); err != nil {
			return fmt.Errorf("%w: %w", errHandoverRefused, err)
		}
		return nil
	}}
	providerID, a.attempts, err = s.tries(ctx, s.providerMessage(a.m, a.inbox, req), a.end, a.m, handover)
	return providerID, err
}

// Release gives the slot back: nothing was sent.
func (a *Admission) Release(ctx context.Context) {
	a.s.settle(ctx, a.tk.Release, a.m.ID)
}

// Conclude settles the slot by Deliver's answer, as a direct send's is (a
// send, or a failure that may have delivered, counts; a certain failure
// gives the slot back), and returns the outcome to record; the message
// takes it too.
func (a *Admission) Conclude(ctx context.Context, providerID string, sendErr error) store.Outcome {
	out, _ := a.s.conclude(ctx, a.tk, a.m, providerID, sendErr, a.cost, a.attempts)
	return out
}

// Done ends the send once its outcome is recorded (or nothing was sent):
// the deletion of its inbox, and Shutdown, stop waiting for it. Call it
// once, after Release or Conclude.
func (a *Admission) Done() {
	if a.leaveGate != nil {
		a.leaveGate()
	}
	a.s.leave(a.id)
}
