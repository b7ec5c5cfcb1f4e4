package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/store"
)

// Store is what the send pipeline needs from persistence.
type Store interface {
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	Thread(ctx context.Context, id string) (*store.Thread, error)
	LastMessage(ctx context.Context, threadID string) (*store.Message, error)
	CreateMessage(ctx context.Context, m *store.Message, atts []store.Attachment, newThread *store.Thread, slot *store.SendSlot) error
	UpdateMessageOutcome(ctx context.Context, id string, o store.Outcome) error
}

// Provider delivers one prepared message and returns the provider's id for it.
type Provider interface {
	Name() string
	Send(ctx context.Context, m providers.Message) (string, error)
}

// SendRequest is one validated send. Addresses are parsed once, at the edge,
// into canonical values: the filter, the stored row and the provider all use
// them as they are. Attachments carry decoded content.
type SendRequest struct {
	// MessageID, when set, is the id the message is recorded under; the
	// API assigns it before the send to tie an Idempotency-Key to it.
	MessageID string
	InboxID   string
	// Inbox, when set, is the sending inbox already loaded by the caller
	// (the API reads it for the rate-limit headers); the pipeline does not
	// read it again.
	Inbox           *store.Inbox
	To, Cc, Bcc     []address.Address
	ReplyTo         []address.Address
	Subject         string
	Body            string // Markdown
	HTML            string // optional: replaces the rendering of Body
	ReplyToThreadID string
	Attachments     []providers.Attachment
	// Windows, if set, is called once the send is settled with the
	// throttle's windows as its admission saw them, this send counted or
	// given back, when the throttle can tell them without being asked
	// again (a shared backend, and no window left full): what the
	// response's rate-limit headers describe.
	Windows func(global, inbox State)
}

// Options configures a Sender. Store, Provider and a Throttle (or a
// Limiter, which is then used on Clock as a MemoryThrottle) are required.
type Options struct {
	Store    Store
	Provider Provider
	Limiter  *GlobalRateLimiter
	Throttle Throttle      // set: used instead of Limiter
	Filter   *DomainFilter // nil allows every domain
	Renderer *Renderer     // nil: a default Renderer
	Logger   *slog.Logger
	Clock    Clock // nil: a SystemClock
	// SendTimeout bounds one provider attempt for a small message (default
	// 60 s); a large message gets longer (see providers.TransferAllowance).
	// Attempts do not follow the request's cancellation: once a send
	// starts, it finishes and is recorded even if the client goes away.
	SendTimeout time.Duration
	// RetryMax is how many times a temporary failure is retried after the
	// first attempt (0: never).
	RetryMax int
	// RetryDeadline is how long after admission a retry may still start
	// (default 30 s).
	RetryDeadline time.Duration
	// RetryBackoff is the first wait between attempts (default 500 ms); it
	// doubles each time, with jitter, up to maxBackoff.
	RetryBackoff time.Duration
	// Observer is told every outcome, retry and refusal (nil: NopObserver).
	Observer Observer
	// RefusalLogInterval is how often a run of refusals by the throttle is
	// summed up in the log (default DefaultRefusalLogInterval).
	RefusalLogInterval time.Duration
}

// maxBackoff caps one wait between attempts.
const maxBackoff = 10 * time.Second

// Sender runs the send pipeline: load → domain filter → throttle → record →
// provider → record the outcome. It is safe for concurrent use; Shutdown
// refuses new sends and waits for those in flight.
type Sender struct {
	o        Options
	refusals *refusalLog

	mu       sync.Mutex
	closing  bool
	inFlight sync.WaitGroup
	running  atomic.Int64 // sends inside Send, for the shutdown report
}

// NewSender returns a Sender.
func NewSender(o Options) *Sender {
	if o.Renderer == nil {
		o.Renderer = NewRenderer()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = NewSystemClock()
	}
	if o.Throttle == nil {
		o.Throttle = NewMemoryThrottle(o.Limiter, o.Clock)
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 60 * time.Second
	}
	o.RetryMax = max(o.RetryMax, 0)
	if o.RetryDeadline <= 0 {
		o.RetryDeadline = 30 * time.Second
	}
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 500 * time.Millisecond
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.RefusalLogInterval <= 0 {
		o.RefusalLogInterval = DefaultRefusalLogInterval
	}
	return &Sender{o: o, refusals: &refusalLog{logger: o.Logger, clock: o.Clock, interval: o.RefusalLogInterval}}
}

// Send sends one message. The returned row is the message as recorded: a
// provider failure is not an error here but a row with status "failed".
// Errors are *NotFoundError, *BlockedError, *RateLimitedError,
// ErrShuttingDown, or a storage or rendering failure.
func (s *Sender) Send(ctx context.Context, req SendRequest) (*store.Message, error) {
	if !s.enter() {
		return nil, ErrShuttingDown
	}
	defer s.running.Add(-1)
	defer s.inFlight.Done()

	inbox, thread, parent, err := s.load(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.checkDomains(ctx, req); err != nil {
		return nil, err
	}
	var (
		m         *store.Message
		atts      []store.Attachment
		newThread *store.Thread
		b         budget
		res       Ticket
	)
	for stale := 0; ; stale++ {
		if m, atts, newThread, err = s.build(req, inbox, thread, parent); err != nil {
			return nil, err
		}
		b = s.budget(m.Size)
		res, err = s.o.Throttle.ReserveInbox(ctx, b.lease, inbox.ID, InboxOverride(inbox))
		if !errors.Is(err, ErrStaleInbox) {
			break
		}
		// Another server changed an inbox since this copy was read: read
		// it again. A copy read just now is as current as any, so after
		// two tries (inboxes changing all the time) it goes unchecked.
		if inbox, err = s.freshInbox(ctx, req.InboxID, stale >= 1); err != nil {
			return nil, err
		}
	}
	if err != nil {
		var rl *RateLimitedError
		if errors.As(err, &rl) {
			s.o.Observer.Refused(rl.Windows())
			s.refusals.refused(ctx, rl)
		}
		return nil, err
	}
	s.refusals.tick()
	if s.o.Logger.Enabled(ctx, slog.LevelDebug) {
		s.o.Logger.DebugContext(ctx, "send admitted by throttle",
			slog.Int("minute_count", res.MinuteCount()), slog.Int("hour_count", res.HourCount()))
	}

	// From here on the send must finish and be recorded even if the client
	// disconnects or the server begins to shut down.
	ctx = context.WithoutCancel(ctx)
	now := s.o.Clock.Now().UTC()
	m.CreatedAt = now
	if newThread != nil {
		newThread.CreatedAt, newThread.LastMessageAt = m.CreatedAt, m.CreatedAt
	}
	slot := &store.SendSlot{ReservedAt: now, Deadline: now.Add(b.lease)}
	if err := s.o.Store.CreateMessage(ctx, m, atts, newThread, slot); err != nil {
		s.settle(ctx, res.Release, m.ID)
		if errors.Is(err, store.ErrNotFound) {
			// The inbox (and so its threads) was deleted since it was loaded.
			return nil, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
		}
		return nil, fmt.Errorf("skuld: record message: %w", err)
	}
	s.deliver(ctx, res, b, m, inbox, req)
	return m, nil
}

// InboxOverride is the throttle override stored with an inbox.
func InboxOverride(in *store.Inbox) Override {
	return Override{PerMinute: in.RateLimitPerMinute, PerHour: in.RateLimitPerHour, Version: in.Version}
}

// budget is the time one send may take, fixed at admission.
type budget struct {
	reserved time.Duration // Mono at admission
	attempt  time.Duration // the longest one provider attempt may take
	// lease is the longest the whole send may take from admission, every
	// retry included: it commits or is released by reserved+lease. The
	// throttle assumes the worst of it for Retry-After, and a crash counts
	// the send at reserved+lease (or the restart, if sooner).
	lease time.Duration
}

func (s *Sender) budget(size int) budget {
	attempt := s.o.SendTimeout + providers.TransferAllowance(size)
	return budget{reserved: s.o.Clock.Mono(), attempt: attempt, lease: s.o.RetryDeadline + attempt}
}

// deliver calls the provider, retrying temporary failures within the
// budget, then settles the reservation and records the outcome, on every
// path: success counts, a failure that may have delivered counts, and only
// a certain failure gives the slot back.
func (s *Sender) deliver(ctx context.Context, res Ticket, b budget, m *store.Message, inbox *store.Inbox, req SendRequest) {
	pm := providerMessage(m, inbox, req)
	var (
		providerID string
		sendErr    error
	)
	for attempt := 1; ; attempt++ {
		left := b.reserved + b.lease - s.o.Clock.Mono()
		providerID, sendErr = s.attempt(ctx, pm, min(b.attempt, left))
		if sendErr == nil || !temporary(sendErr) || attempt > s.o.RetryMax {
			break
		}
		wait := s.backoff(attempt, sendErr)
		if s.o.Clock.Mono()+wait-b.reserved > s.o.RetryDeadline {
			break
		}
		s.o.Observer.Retried(s.o.Provider.Name())
		s.o.Logger.WarnContext(ctx, "provider failed temporarily, retrying", slog.String("message_id", m.ID),
			slog.Int("attempt", attempt), slog.Duration("wait", wait), slog.Any("error", sendErr))
		time.Sleep(wait)
	}

	now := s.o.Clock.Now().UTC()
	var out store.Outcome
	switch {
	case sendErr == nil:
		s.settle(ctx, res.Commit, m.ID)
		out = store.Outcome{Status: store.StatusSent, ProviderMessageID: &providerID, SentAt: &now, CountedAt: &now}
		s.o.Observer.SendFinished(s.o.Provider.Name(), OutcomeSent)
		s.o.Logger.InfoContext(ctx, "message sent", slog.String("message_id", m.ID),
			slog.String("provider", s.o.Provider.Name()))
	case deliveryUnknown(sendErr):
		// It may have gone out: it counts, now and after any restart.
		s.settle(ctx, res.Commit, m.ID)
		msg := userError(sendErr)
		out = store.Outcome{Status: store.StatusFailed, Error: &msg, CountedAt: &now}
		s.o.Observer.SendFinished(s.o.Provider.Name(), OutcomeUnknown)
		s.o.Logger.WarnContext(ctx, "provider outcome unknown; counted as sent", slog.String("message_id", m.ID),
			slog.String("provider", s.o.Provider.Name()), slog.String("cause", providers.Cause(sendErr)),
			slog.Any("error", sendErr))
	default:
		s.settle(ctx, res.Release, m.ID)
		msg := userError(sendErr)
		out = store.Outcome{Status: store.StatusFailed, Error: &msg}
		s.o.Observer.SendFinished(s.o.Provider.Name(), OutcomeFailed)
		// Worded by cause: "refused" only when the server answered no.
		cause := providers.Cause(sendErr)
		s.o.Logger.WarnContext(ctx, "provider send failed: "+providers.DescribeCause(cause),
			slog.String("message_id", m.ID), slog.String("provider", s.o.Provider.Name()),
			slog.String("cause", cause), slog.Any("error", sendErr))
	}
	if req.Windows != nil {
		if g, in, ok := res.States(out.CountedAt != nil); ok {
			req.Windows(g, in)
		}
	}
	m.Status, m.ProviderMessageID, m.Error, m.SentAt = out.Status, out.ProviderMessageID, out.Error, out.SentAt
	if err := s.o.Store.UpdateMessageOutcome(ctx, m.ID, out); err != nil {
		// The provider has answered and the throttle is settled; the row
		// stays "sending" and its slot in flight, both resolved at the
		// next start-up, where the slot counts.
		s.o.Logger.ErrorContext(ctx, "record send outcome", slog.String("message_id", m.ID),
			slog.String("status", out.Status), slog.Any("error", err))
	}
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
	return s.o.Provider.Send(ctx, pm)
}

// backoff is the wait before retry number attempt: exponential with equal
// jitter, so that clients failing together do not retry together, and
// never shorter than the provider asked.
func (s *Sender) backoff(attempt int, err error) time.Duration {
	d := min(s.o.RetryBackoff<<(attempt-1), maxBackoff)
	d = d/2 + rand.N(d/2+1)
	var se *providers.SendError
	if errors.As(err, &se) {
		d = max(d, se.RetryAfter)
	}
	return d
}

// temporary reports a failure after which the message was certainly not
// taken and may be accepted later. A deadline that struck before the
// provider began (waiting for a connection) is one.
func temporary(err error) bool {
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

// load fetches the inbox, the reply thread and the message it answers.
func (s *Sender) load(ctx context.Context, req SendRequest) (*store.Inbox, *store.Thread, *store.Message, error) {
	inbox, err := req.Inbox, error(nil)
	if inbox == nil || inbox.ID != req.InboxID {
		inbox, err = s.o.Store.Inbox(ctx, req.InboxID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	if req.ReplyToThreadID == "" {
		return inbox, nil, nil, nil
	}
	thread, err := s.o.Store.Thread(ctx, req.ReplyToThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && thread.InboxID != inbox.ID) {
		return nil, nil, nil, &NotFoundError{Kind: "Thread", ID: req.ReplyToThreadID}
	}
	if err != nil {
		return nil, nil, nil, err
	}
	parent, err := s.o.Store.LastMessage(ctx, thread.ID)
	if errors.Is(err, store.ErrNotFound) {
		return inbox, thread, nil, nil
	}
	return inbox, thread, parent, err
}

// freshInbox reads the inbox from the database, for a send whose copy was
// stale; unchecked drops the copy's version, so that the throttle does not
// check it.
func (s *Sender) freshInbox(ctx context.Context, id string, unchecked bool) (*store.Inbox, error) {
	in, err := s.o.Store.Inbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Kind: "Inbox", ID: id}
	}
	if err != nil {
		return nil, err
	}
	if unchecked {
		in.Version = ""
	}
	return in, nil
}

// checkDomains applies the outbound domain policy to every recipient and to
// Reply-To (a Reply-To at a blocked domain routes the replies there):
// rejections are logged at INFO with the pattern, allows at DEBUG.
func (s *Sender) checkDomains(ctx context.Context, req SendRequest) error {
	rejected := s.o.Filter.Rejected(req.To, req.Cc, req.Bcc, req.ReplyTo)
	if len(rejected) == 0 {
		if s.o.Logger.Enabled(ctx, slog.LevelDebug) {
			for _, list := range [][]address.Address{req.To, req.Cc, req.Bcc, req.ReplyTo} {
				for _, a := range list {
					_, domain, _ := s.o.Filter.Check(a)
					s.o.Logger.DebugContext(ctx, "recipient domain allowed", slog.String("domain", domain))
				}
			}
		}
		return nil
	}
	domains := make([]string, len(rejected))
	for i, r := range rejected {
		s.o.Logger.InfoContext(ctx, "recipient domain blocked",
			slog.String("domain", r.Domain), slog.String("pattern", r.Pattern))
		domains[i] = r.Domain
	}
	slices.Sort(domains)
	return &BlockedError{Domains: slices.Compact(domains)}
}

// enter registers a send unless shutdown has begun.
func (s *Sender) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing {
		return false
	}
	s.inFlight.Add(1)
	s.running.Add(1)
	return true
}

// InFlight returns the number of sends under way.
func (s *Sender) InFlight() int { return int(s.running.Load()) }

// Shutdown refuses new sends and waits until every send in flight has been
// recorded, or ctx ends. It is safe to call more than once.
func (s *Sender) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inFlight.Wait(); close(done) }()
	// New sends are refused from here on: the refusals counted so far are
	// all there will be. flush is a no-op on the second call.
	defer s.refusals.flush()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("skuld: sends still in flight: %w", ctx.Err())
	}
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

func violationCounts(e *RateLimitedError) string {
	parts := make([]string, len(e.Violations))
	for i, v := range e.Violations {
		parts[i] = fmt.Sprintf("%s %d/%d", v.Window, v.Count, v.Limit)
	}
	return strings.Join(parts, "; ")
}
