package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
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
	CreateMessage(ctx context.Context, m *store.Message, atts []store.Attachment, newThread *store.Thread) error
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
	InboxID         string
	To, Cc, Bcc     []address.Address
	ReplyTo         []address.Address
	Subject         string
	Body            string // Markdown
	HTML            string // optional: replaces the rendering of Body
	ReplyToThreadID string
	Attachments     []providers.Attachment
}

// Options configures a Sender. Store, Provider and Limiter are required.
type Options struct {
	Store    Store
	Provider Provider
	Limiter  *GlobalRateLimiter
	Filter   *DomainFilter // nil allows every domain
	Renderer *Renderer     // nil: a default Renderer
	Logger   *slog.Logger
	// SendTimeout bounds one provider call (default 60 s). The call does not
	// follow the request's cancellation: once a send starts, it finishes and
	// is recorded even if the client goes away.
	SendTimeout time.Duration
	Now         func() time.Time // default time.Now
}

// Sender runs the send pipeline: load → domain filter → throttle → record →
// provider → record the outcome. It is safe for concurrent use; Shutdown
// refuses new sends and waits for those in flight.
type Sender struct {
	o Options

	mu       sync.Mutex
	closing  bool
	inFlight sync.WaitGroup
}

// NewSender returns a Sender.
func NewSender(o Options) *Sender {
	if o.Renderer == nil {
		o.Renderer = NewRenderer()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = 60 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Sender{o: o}
}

// Send sends one message. The returned row is the message as recorded: a
// provider failure is not an error here but a row with status "failed".
// Errors are *NotFoundError, *BlockedError, *RateLimitedError,
// ErrShuttingDown, or a storage or rendering failure.
func (s *Sender) Send(ctx context.Context, req SendRequest) (*store.Message, error) {
	if !s.enter() {
		return nil, ErrShuttingDown
	}
	defer s.inFlight.Done()

	inbox, thread, parent, err := s.load(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.checkDomains(ctx, req); err != nil {
		return nil, err
	}
	m, atts, newThread, err := s.build(req, inbox, thread, parent)
	if err != nil {
		return nil, err
	}

	res, err := s.o.Limiter.Reserve(s.o.Now())
	if err != nil {
		var rl *RateLimitedError
		if errors.As(err, &rl) {
			s.o.Logger.WarnContext(ctx, "send refused by throttle",
				slog.String("windows", strings.Join(rl.Windows(), "; ")),
				slog.String("counts", violationCounts(rl)),
				slog.Int("retry_after", rl.RetryAfterSeconds()))
		}
		return nil, err
	}
	if s.o.Logger.Enabled(ctx, slog.LevelDebug) {
		s.o.Logger.DebugContext(ctx, "send admitted by throttle",
			slog.Int("minute_count", res.MinuteCount()), slog.Int("hour_count", res.HourCount()))
	}

	// From here on the send must finish and be recorded even if the client
	// disconnects or the server begins to shut down.
	ctx = context.WithoutCancel(ctx)
	m.CreatedAt = s.o.Now().UTC()
	if newThread != nil {
		newThread.CreatedAt, newThread.LastMessageAt = m.CreatedAt, m.CreatedAt
	}
	if err := s.o.Store.CreateMessage(ctx, m, atts, newThread); err != nil {
		res.Release()
		if errors.Is(err, store.ErrNotFound) {
			// The inbox (and so its threads) was deleted since it was loaded.
			return nil, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
		}
		return nil, fmt.Errorf("skuld: record message: %w", err)
	}
	s.deliver(ctx, res, m, inbox, req)
	return m, nil
}

// deliver calls the provider, settles the reservation and records the outcome.
func (s *Sender) deliver(ctx context.Context, res Reservation, m *store.Message, inbox *store.Inbox, req SendRequest) {
	sendCtx, cancel := context.WithTimeout(ctx, s.o.SendTimeout)
	providerID, sendErr := s.o.Provider.Send(sendCtx, providerMessage(m, inbox, req))
	cancel()

	now := s.o.Now().UTC()
	var out store.Outcome
	if sendErr != nil {
		res.Release()
		msg := userError(sendErr)
		out = store.Outcome{Status: store.StatusFailed, Error: &msg}
		s.o.Logger.WarnContext(ctx, "provider refused message", slog.String("message_id", m.ID),
			slog.String("provider", s.o.Provider.Name()), slog.Any("error", sendErr))
	} else {
		res.Commit(now)
		out = store.Outcome{Status: store.StatusSent, ProviderMessageID: &providerID, SentAt: &now}
		s.o.Logger.InfoContext(ctx, "message sent", slog.String("message_id", m.ID),
			slog.String("provider", s.o.Provider.Name()))
	}
	m.Status, m.ProviderMessageID, m.Error, m.SentAt = out.Status, out.ProviderMessageID, out.Error, out.SentAt
	if err := s.o.Store.UpdateMessageOutcome(ctx, m.ID, out); err != nil {
		// The provider has answered and the throttle is settled; the row
		// stays "sending" and is resolved at the next start-up.
		s.o.Logger.ErrorContext(ctx, "record send outcome", slog.String("message_id", m.ID),
			slog.String("status", out.Status), slog.Any("error", err))
	}
}

// load fetches the inbox, the reply thread and the message it answers.
func (s *Sender) load(ctx context.Context, req SendRequest) (*store.Inbox, *store.Thread, *store.Message, error) {
	inbox, err := s.o.Store.Inbox(ctx, req.InboxID)
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
	return true
}

// Shutdown refuses new sends and waits until every send in flight has been
// recorded, or ctx ends. It is safe to call more than once.
func (s *Sender) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.inFlight.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("skuld: sends still in flight: %w", ctx.Err())
	}
}

// userError is what the stored row and the client learn of a failed send:
// the kind of failure and the server's reply code, never the provider's
// own sentence, which names the relay ("connect to 10.0.0.5:2528") and may
// quote its banner. The full error goes to the log.
func userError(err error) string {
	var se *providers.SendError
	switch {
	case errors.As(err, &se) && se.Unknown:
		return "The mail server did not confirm the message after it was handed over: it may have been delivered"
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
