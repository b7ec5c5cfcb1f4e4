package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// deliver calls the provider, retrying temporary failures until end (mono,
// the end of the send's lease), then settles the reservation and records
// the outcome, on every path: success counts, a failure that may have
// delivered counts, and only a certain failure gives the slot back. It
// returns the windows the settlement reports, for the rate-limit headers.
func (s *Sender) deliver(ctx context.Context, tk throttle.Ticket, end time.Duration, m *store.Message, inbox *store.Inbox, req SendRequest) throttle.Snapshot {
	providerID, attempts, sendErr := s.tries(ctx, s.providerMessage(m, inbox, req), end, m, s.handover(ctx, m.ID))
	out, windows := s.conclude(ctx, tk, m, providerID, sendErr, s.cost(req), attempts)
	err := s.o.Store.UpdateMessageOutcome(ctx, m.ID, out)
	if errors.Is(err, store.ErrNotFound) {
		// Deleted with its inbox meanwhile. A deletion waits for the
		// inbox's sends in flight (inboxGates here, store.DeleteInbox on
		// every server) until their deadline only: this send outlived its
		// lease, as a server whose clock runs behind the deleting one's
		// may see it. Not a fault of ours: the deletion took the record.
		s.o.Logger.WarnContext(ctx, "message deleted with its inbox while it was being sent; its outcome is not recorded",
			slog.String("message_id", m.ID), slog.String("status", out.Status))
		return windows
	}
	if err != nil {
		// The provider has answered and the throttle is settled; the row
		// stays "sending" and its slot in flight, both resolved at the
		// next start-up, where the slot counts.
		s.o.Logger.ErrorContext(ctx, "record send outcome", slog.String("message_id", m.ID),
			slog.String("status", out.Status), slog.Any("error", err))
	}
	return windows
}

// tries calls the provider, retrying temporary failures while a retry can
// start before end (mono) less one attempt. Each attempt records on the
// send's slot a wait for the provider and its end (handover). It returns
// how many attempts reached the provider: not one whose claim at the
// handover was refused.
func (s *Sender) tries(ctx context.Context, pm providers.Message, end time.Duration, m *store.Message, trace *providers.HandoverTrace) (string, int, error) {
	ctx = providers.WithHandoverTrace(ctx, trace)
	attemptMax := s.o.Budget.Attempt(m.Size)
	retryBy := end - attemptMax // no retry starts later: RetryDeadline after admission
	var (
		providerID string
		sendErr    error
		attempts   int
	)
	for attempt := 1; ; attempt++ {
		left := end - s.o.Clock.Mono()
		providerID, sendErr = s.attempt(ctx, pm, min(attemptMax, left))
		if errors.Is(sendErr, errHandoverRefused) {
			break
		}
		attempts++
		if sendErr == nil || !Temporary(sendErr) || attempt > s.o.RetryMax {
			break
		}
		wait := s.backoff(attempt, sendErr)
		if s.o.Clock.Mono()+wait > retryBy {
			break
		}
		s.o.Observer.Retried(s.o.Provider.Name())
		s.o.Logger.InfoContext(ctx, "provider failed temporarily, retrying", slog.String("message_id", m.ID),
			slog.Int("attempt", attempt), slog.Int64("wait_ms", wait.Milliseconds()),
			slog.String("cause", providers.Cause(sendErr)), slog.Any("error", sendErr))
		time.Sleep(wait)
	}
	return providerID, attempts, sendErr
}

// conclude settles a send's reservation, of cost units, by what the
// provider answered after attempts calls. It returns the outcome to record
// (m takes it too), which carries the windows the settlement reports as
// the send's admission, and those windows.
func (s *Sender) conclude(ctx context.Context, tk throttle.Ticket, m *store.Message, providerID string, sendErr error,
	cost, attempts int) (store.Outcome, throttle.Snapshot) {
	now := s.o.Clock.Now().UTC()
	provider := s.o.Provider.Name()
	var (
		out     store.Outcome
		windows throttle.Snapshot
	)
	switch {
	case sendErr == nil:
		windows = s.settle(ctx, tk.Commit, m.ID)
		out = store.Outcome{Status: store.StatusSent, ProviderMessageID: &providerID, SentAt: &now, CountedAt: &now}
		s.o.Observer.SendFinished(provider, OutcomeSent, "")
		s.o.Logger.InfoContext(ctx, "message sent", slog.String("message_id", m.ID), slog.String("provider", provider))
	case deliveryUnknown(sendErr):
		// It may have gone out: it counts, now and after any restart.
		windows = s.settle(ctx, tk.Commit, m.ID)
		msg := userError(sendErr)
		out = store.Outcome{Status: store.StatusFailed, Error: &msg, CountedAt: &now}
		cause := providers.Cause(sendErr)
		s.o.Observer.SendFinished(provider, OutcomeUnknown, cause)
		s.o.Logger.WarnContext(ctx, "provider outcome unknown; counted as sent", slog.String("message_id", m.ID),
			slog.String("provider", provider), slog.String("cause", cause), slog.Any("error", sendErr))
	default:
		windows = s.settle(ctx, tk.Release, m.ID)
		msg := userError(sendErr)
		out = store.Outcome{Status: store.StatusFailed, Error: &msg}
		// Worded by cause: "refused" only when the server answered no.
		cause := providers.Cause(sendErr)
		s.o.Observer.SendFinished(provider, OutcomeFailed, cause)
		s.o.Logger.WarnContext(ctx, "provider send failed: "+providers.DescribeCause(cause),
			slog.String("message_id", m.ID), slog.String("provider", provider),
			slog.String("cause", cause), slog.Any("error", sendErr))
	}
	out.Admission, out.Attempts = decisionJSON(Decision{At: now, Cost: cost, Windows: decisionWindows(windows)}), attempts
	m.Status, m.ProviderMessageID, m.Error, m.SentAt = out.Status, out.ProviderMessageID, out.Error, out.SentAt
	m.ThrottleAdmission, m.Attempts = out.Admission, m.Attempts+attempts
	return out, windows
}

// settle commits or releases a Ticket and returns the windows it reports.
// A shared backend that cannot be reached leaves the reservation in
// flight; it is reclaimed, counted, when its lease runs out, so the
// promise holds and only quota is lost for a while.
func (s *Sender) settle(ctx context.Context, f func(context.Context) (throttle.Snapshot, error), messageID string) throttle.Snapshot {
	snap, err := f(ctx)
	if err != nil {
		s.o.Logger.ErrorContext(ctx, "settle throttle reservation; it counts until its lease ends",
			slog.String("message_id", messageID), slog.Any("error", err))
	}
	if s.o.Logger.Enabled(ctx, slog.LevelDebug) {
		s.o.Logger.DebugContext(ctx, "throttle settled", slog.String("message_id", messageID),
			slog.Int("minute_count", snap.Global.PerMinute.Used+snap.Global.PerMinute.InFlight),
			slog.Int("hour_count", snap.Global.PerHour.Used+snap.Global.PerHour.InFlight))
	}
	return snap
}

// attempt makes one provider call bounded by timeout. A provider that
// panics may have sent the message: that is an unknown outcome, not a
// crashed request with its reservation leaked.
func (s *Sender) attempt(ctx context.Context, pm providers.Message, timeout time.Duration) (id string, err error) {
	if timeout <= 0 {
		return "", context.DeadlineExceeded
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := s.o.Clock.Mono()
	defer func() {
		outcome := OutcomeSent
		switch {
		case err != nil && deliveryUnknown(err):
			outcome = OutcomeUnknown
		case err != nil:
			outcome = OutcomeFailed
		}
		s.o.Observer.ProviderCall(s.o.Provider.Name(), outcome, s.o.Clock.Mono()-start)
	}()
	defer func() {
		if r := recover(); r != nil {
			s.o.Logger.ErrorContext(ctx, "provider panicked", slog.String("provider", s.o.Provider.Name()),
				slog.Any("panic", r), slog.String("stack", string(debug.Stack())))
			pe := providers.NewSendError(s.o.Provider.Name()+": the provider failed unexpectedly", fmt.Errorf("panic: %v", r))
			pe.Unknown = true
			id, err = "", pe
		}
	}()
	if _, reports := s.o.Provider.(providers.HandoverReporter); !reports {
		// A provider that never waits is handed the message when called.
		if t := providers.HandoverOf(ctx); t != nil && t.HandedOver != nil {
			if err := t.HandedOver(); err != nil {
				return "", err
			}
		}
	}
	return s.o.Provider.Send(ctx, pm)
}

// Temporary reports a failure after which the message was certainly not
// taken and may be accepted later. A deadline that struck before the
// provider began (waiting for a connection) is one.
func Temporary(err error) bool {
	var se *providers.SendError
	if errors.As(err, &se) {
		return se.Temporary
	}
	return errors.Is(err, context.DeadlineExceeded)
}

// deliveryUnknown reports a failure after which the message may have been
// delivered.
func deliveryUnknown(err error) bool {
	var se *providers.SendError
	return errors.As(err, &se) && se.Unknown
}

// userError is what the stored row and the client learn of a failed send:
// a provider's own sentence (providers word them for users: the kind of
// failure and the server's reply, never a relay's address, a key or a
// URL), or, without one, the kind of failure and the reply code. A send
// whose fate is unknown says so first. The full error goes to the log.
func userError(err error) string {
	var se *providers.SendError
	if errors.As(err, &se) && se.Error() != "" {
		msg := se.Error()
		if len(msg) > 1000 {
			msg = msg[:1000] + "…"
		}
		if se.Unknown {
			msg = "delivery unknown: " + msg
		}
		return msg
	}
	switch {
	case se != nil && se.Unknown:
		return "delivery unknown: the mail server did not confirm the message after it was handed over; it may have been delivered"
	case se != nil && se.Code != 0 && se.Temporary:
		return fmt.Sprintf("The mail server deferred the message (reply code %d); it was not sent, try again later", se.Code)
	case se != nil && se.Code != 0:
		return fmt.Sprintf("The mail server refused the message (reply code %d)", se.Code)
	case se != nil && se.Temporary:
		return "Could not reach the mail server; the message was not sent, try again later"
	case se != nil:
		return "Could not deliver to the mail server (connection, TLS or authentication failure); the message was not sent"
	case errors.Is(err, context.DeadlineExceeded):
		return "The mail server did not answer in time; the message may not have been sent"
	}
	return "The provider could not send the message"
}

// handover is the trace of a direct send (whose row and slot are written
// before it is sent) that records on message id's slot that it waits for
// the provider, and that it no longer does. The slot reads "handed over"
// until told otherwise, so a send that gets its slot at once writes
// nothing; nor does one that gets it within waitUnrecorded. Once an
// attempt has been handed over, the send may have gone: a retry's wait is
// never recorded. A recorded wait is always ended before the bytes go, and
// a send whose end cannot be recorded (a recovery gave it back) does not go.
func (s *Sender) handover(ctx context.Context, id string) *providers.HandoverTrace {
	var (
		mu              sync.Mutex // the timer's write against the hand-over
		handed, waiting bool
		timer           clock.Timer
	)
	mark := func() {
		mu.Lock()
		defer mu.Unlock()
		if handed || waiting {
			return
		}
		waiting = true
		if err := s.o.Store.MarkSendWaiting(ctx, id); err != nil {
			s.o.Logger.WarnContext(ctx, "record that a send waits for the provider; a crash now leaves it delivery unknown",
				slog.String("message_id", id), slog.Any("error", err))
		}
	}
	return &providers.HandoverTrace{
		Waiting: func() {
			mu.Lock()
			defer mu.Unlock()
			if !handed && timer == nil {
				timer = s.o.Clock.AfterFunc(waitUnrecorded, mark)
			}
		},
		HandedOver: func() error {
			mu.Lock()
			defer mu.Unlock()
			if timer != nil {
				timer.Stop() // a mark under way holds mu: it is done, or will find handed
			}
			if waiting {
				if err := s.o.Store.MarkSendHandedOver(ctx, id); err != nil {
					return fmt.Errorf("%w: %w", errHandoverRefused, err)
				}
				waiting = false
			}
			handed = true
			return nil
		},
	}
}

// waitUnrecorded is how long a direct send waits for the provider before
// the wait is recorded. A busy connection is usually free within
// milliseconds (32 clients on 4 SMTP connections: about 45 ms), and
// recording every such wait cost two writes a send: direct sends/s on
// PostgreSQL fell from about 745 to 545 (BENCHMARKS.md, section 18). A
// crash within it leaves the send "delivery unknown" though it never went:
// the safe side, never sent twice. Held mail needs no such record: it is
// claimed only once the provider has a connection for it (Admission.Deliver).
const waitUnrecorded = 100 * time.Millisecond

// errHandoverRefused is a hand-over its record refused (a claim that lost,
// a send given back): the send does not go, and is not tried again.
var errHandoverRefused = errors.New("skuld: hand-over refused")
