package skuld

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/render"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// Store is what the send pipeline needs from persistence.
type Store interface {
	// Inbox reads the inbox as it is; InboxCopy may return a copy out of
	// date on a database shared with other servers, which the record of
	// a send judged by it checks (store.SendSlot.JudgedBy).
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	InboxCopy(ctx context.Context, id string) (*store.Inbox, error)
	Thread(ctx context.Context, id string) (*store.Thread, error)
	LastMessage(ctx context.Context, threadID string) (*store.Message, error)
	CreateMessage(ctx context.Context, m *store.Message, atts []store.Attachment, newThread *store.Thread, slot *store.SendSlot) error
	UpdateMessageOutcome(ctx context.Context, id string, o store.Outcome) error
	// MarkSendWaiting and MarkSendHandedOver record on a send's slot that
	// it waits for the provider, and that it no longer does (handover).
	MarkSendWaiting(ctx context.Context, id string) error
	MarkSendHandedOver(ctx context.Context, id string) error
	// Suppressed returns the suppressions of those of emails (canonical)
	// on the suppression list.
	Suppressed(ctx context.Context, emails []string) ([]store.Suppression, error)
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
	// Inbox, when set, is the sending inbox as the caller read it, with
	// InboxCopy or Inbox; the pipeline does not read it again unless it
	// finds that it changed.
	Inbox           *store.Inbox
	To, Cc, Bcc     []address.Address
	ReplyTo         []address.Address
	Subject         string
	Body            string // Markdown; empty with HTML: derived from it (PlainText)
	HTML            string // optional: replaces the rendering of Body
	ReplyToThreadID string
	Attachments     []providers.Attachment
	// Labels and Metadata are kept with the message and returned with it;
	// nothing of them goes out.
	Labels   []string
	Metadata map[string]any
	// QueueOnThrottle holds a send the throttle refuses, as queued in its
	// inbox's lane, instead of failing it (on_throttle "queue"); it needs
	// Options.Hold.
	QueueOnThrottle bool
	// Async holds the send as queued in its inbox's lane once it is
	// accepted, filtered and recorded, instead of sending it now (Prefer:
	// respond-async): the lane sends it under the same throttle, and its
	// outcome reaches the application as a webhook. It needs Options.Hold.
	Async bool
	// ScheduledAt, when set, holds the message until then (Schedule)
	// instead of sending it now; it needs Options.Hold.
	ScheduledAt *time.Time
}

// Result is a send that was recorded: the message as recorded (a provider
// failure is a message with status "failed", not an error), and the
// throttle's windows as the send's admission saw them, with it counted or
// given back, which its rate-limit headers describe. Windows has no limited
// window when the throttle could not tell (THROTTLE_FAIL=open).
//
// Inbox is the inbox the send was judged by (its From, its windows), so
// that its caller need not read it again. Send sets it with an error too,
// once the inbox was loaded (a thread not found, a blocked domain, a
// refusal, a failure to record), for the windows of that answer; it is nil
// when the inbox was not found or is gone.
type Result struct {
	Message *store.Message
	Windows throttle.Snapshot
	Inbox   *store.Inbox
}

// Renderer turns a Markdown body into HTML, as *render.Renderer does.
type Renderer interface {
	Render(ctx context.Context, markdown string) (string, error)
}

// Options configures a Sender. Store, Provider and Throttle are required.
type Options struct {
	Store    Store
	Provider Provider
	Throttle throttle.Throttle
	// Unit is what a send costs in the throttle's windows: 1 a message,
	// or its unique recipients (THROTTLE_UNIT).
	Unit     throttle.Unit
	Filter   *filter.Filter // nil allows every domain
	Renderer Renderer       // nil: render.New()
	Logger   *slog.Logger
	Clock    clock.Clock // nil: the system clock
	// Budget bounds every send (its lease, each attempt). Attempts do not
	// follow the request's cancellation: once a send is recorded, it
	// finishes and its outcome is recorded even if the client goes away.
	Budget Budget
	// RetryMax is how many times a temporary failure is retried after the
	// first attempt (0: never).
	RetryMax int
	// RetryBackoff is the first wait between attempts (default 500 ms); it
	// doubles each time, with jitter, up to maxBackoff.
	RetryBackoff time.Duration
	// Observer is told every outcome, retry and refusal (nil: NopObserver).
	Observer Observer
	// Hold, when set, lets the Sender hold messages: Schedule, and sends
	// with QueueOnThrottle (nil: ErrNoHold).
	Hold *Hold
	// RefusalLogInterval is how often a run of refusals by the throttle is
	// summed up in the log (default DefaultRefusalLogInterval).
	RefusalLogInterval time.Duration
	// ReturnPath, when set, is the envelope sender of message id (the
	// SMTP provider's VERP address, whose bounces name the message);
	// recipient is its one recipient, canonical, or "" when it has
	// several. Nil, or "" returned: the From.
	ReturnPath func(id, recipient string) string
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
	next     uint64
	ends     map[uint64]time.Duration // mono by which each send in flight ends at the latest

	gates inboxGates // a send against the deletion of its inbox
}

// NewSender returns a Sender.
func NewSender(o Options) *Sender {
	if o.Renderer == nil {
		o.Renderer = render.New()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Clock == nil {
		o.Clock = clock.NewSystem()
	}
	o.Budget = o.Budget.withDefaults()
	o.RetryMax = max(o.RetryMax, 0)
	if o.RetryBackoff <= 0 {
		o.RetryBackoff = 500 * time.Millisecond
	}
	if o.Observer == nil {
		o.Observer = NopObserver{}
	}
	if o.RefusalLogInterval <= 0 {
		o.RefusalLogInterval = DefaultRefusalLogInterval
	}
	return &Sender{o: o, ends: map[uint64]time.Duration{},
		refusals: &refusalLog{logger: o.Logger, clock: o.Clock, interval: o.RefusalLogInterval}}
}

// InboxKey is the key of an inbox's throttle windows: its address, which
// the provider and the recipients see, so that deleting an inbox and
// creating it again with the same address does not give it a fresh quota.
func InboxKey(in *store.Inbox) string { return strings.ToLower(in.EmailAddress) }

// InboxOverride is the throttle override stored with an inbox.
func InboxOverride(in *store.Inbox) throttle.Override {
	return throttle.Override{PerMinute: in.RateLimitPerMinute, PerHour: in.RateLimitPerHour, PerDay: in.RateLimitPerDay}
}

// Send sends one message: admit, then deliver. Errors are *NotFoundError,
// *BlockedError, *SuppressedError, *throttle.RateLimitedError, *throttle.UnavailableError,
// ErrShuttingDown, the ctx's error (the client went away before the
// message was recorded: nothing was taken or sent), or a storage failure;
// Result.Inbox says by which inbox it was judged, with an error too.
//
// With req.ScheduledAt, Send is Schedule; with req.QueueOnThrottle, a send
// the throttle refuses, or one whose inbox has mail queued already, is
// recorded as queued in its inbox's lane (Result.Message.Status says so).
func (s *Sender) Send(ctx context.Context, req SendRequest) (Result, error) {
	if req.ScheduledAt != nil {
		// Schedule judges req by req.Inbox when it is given (load).
		inbox, err := s.loadInbox(ctx, req)
		if err != nil {
			return Result{}, err
		}
		req.Inbox = inbox
		res, err := s.Schedule(ctx, req, *req.ScheduledAt)
		if !inboxGone(err) {
			res.Inbox = inbox
		}
		return res, err
	}
	id, ok := s.enter(sizeBound(req))
	if !ok {
		return Result{}, ErrShuttingDown
	}
	defer s.leave(id)
	leave, err := s.sending(ctx, req.InboxID)
	if err != nil {
		return Result{}, err
	}
	defer leave()
	var adm admission
	for tries := 1; ; tries++ {
		adm, err = s.admit(ctx, req)
		if !errors.Is(err, store.ErrInboxChanged) || tries == maxInboxChanges {
			break
		}
		req.Inbox = nil // judged again by the inbox as it is now
	}
	if err != nil || adm.ticket == nil {
		return adm.Result, err
	}
	// Recorded: the send must finish and its outcome be recorded even if
	// the client disconnects or the server begins to shut down.
	adm.Windows = s.deliver(context.WithoutCancel(ctx), adm.ticket, adm.end, adm.Message, adm.Inbox, req)
	return adm.Result, nil
}

// maxInboxChanges bounds how often one send is judged again because its
// inbox changed meanwhile (each time, a PATCH on another server).
const maxInboxChanges = 3

// admission is what admit decided for a send: its Result so far, with the
// inbox it was judged by, and, for a send admitted now and recorded as
// sending, the throttle's ticket and the end of its lease (mono), which
// deliver settles. A send held instead (queued) has no ticket: its Result
// is final.
type admission struct {
	Result
	ticket throttle.Ticket
	end    time.Duration
}

// admit judges req by its inbox (req.Inbox, a copy that may be out of
// date on a shared database, or read here) — the thread it answers, the
// domain filter and the suppression list, the inbox's lane, the throttle — and records the message
// as sending with its slot, or holds it as queued. With
// store.ErrInboxChanged nothing was recorded or taken: judge again.
func (s *Sender) admit(ctx context.Context, req SendRequest) (admission, error) {
	inbox, err := s.loadInbox(ctx, req)
	if err != nil {
		return admission{}, err
	}
	adm := admission{Result: Result{Inbox: inbox}}
	thread, parent, err := s.loadThread(ctx, req, inbox)
	if err != nil {
		return adm, err
	}
	if err := s.screen(ctx, req); err != nil {
		return adm, err
	}
	if req.Async && s.o.Hold != nil {
		return s.queued(ctx, req, inbox, thread, parent, s.o.Clock.Now(), nil)
	}
	queue := req.QueueOnThrottle && s.o.Hold != nil
	if queue {
		next, busy, err := s.laneBusy(ctx, inbox.ID)
		if err != nil {
			return adm, err
		}
		if busy {
			return s.queued(ctx, req, inbox, thread, parent, next, nil)
		}
	}
	lease := s.o.Budget.Lease(sizeBound(req))
	reserved := s.o.Clock.Mono()
	cost := s.cost(req)
	tk, err := s.o.Throttle.Reserve(ctx, throttle.Request{Inbox: InboxKey(inbox), Override: InboxOverride(inbox), Lease: lease, Cost: cost})
	if err != nil {
		var rl *throttle.RateLimitedError
		if errors.As(err, &rl) {
			// A refusal by a copy is confirmed by the inbox as it is.
			if _, err := s.current(ctx, inbox); err != nil {
				return admission{}, err
			}
			s.o.Observer.Refused(rl.Windows())
			s.refusals.refused(ctx, rl)
			if queue {
				return s.queued(ctx, req, inbox, thread, parent, s.o.Clock.Now().Add(HeldWait(rl)), rl)
			}
		}
		return adm, err
	}

	// Rendering comes after admission, so that a refusal costs none; it
	// stops, and the slot is given back, if the client has gone.
	m, atts, newThread, err := s.build(ctx, req, inbox, thread, parent)
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		s.settle(ctx, tk.Release, req.MessageID)
		return adm, err
	}
	// From here on the send must be recorded even if the client
	// disconnects or the server begins to shut down.
	ctx = context.WithoutCancel(ctx)
	now := s.o.Clock.Now().UTC()
	m.CreatedAt = now
	if newThread != nil {
		newThread.CreatedAt, newThread.LastMessageAt = m.CreatedAt, m.CreatedAt
	}
	slot := &store.SendSlot{Scope: InboxKey(inbox), ReservedAt: now, Deadline: now.Add(lease), Cost: cost, JudgedBy: inbox}
	if err := s.o.Store.CreateMessage(ctx, m, atts, newThread, slot); err != nil {
		s.settle(ctx, tk.Release, m.ID)
		switch {
		case errors.Is(err, store.ErrInboxChanged):
			return admission{}, err
		case errors.Is(err, store.ErrNotFound):
			// The inbox (and so its threads) was deleted since it was loaded.
			return admission{}, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
		}
		return adm, fmt.Errorf("skuld: record message: %w", err)
	}
	adm.Message, adm.ticket, adm.end = m, tk, reserved+lease
	return adm, nil
}

// queued is the admission of a send held as queued instead (queue): a
// final Result, without a ticket. rl is the throttle's refusal that
// queued it, nil if none did.
func (s *Sender) queued(ctx context.Context, req SendRequest, inbox *store.Inbox, thread *store.Thread, parent *store.Message,
	next time.Time, rl *throttle.RateLimitedError) (admission, error) {
	res, err := s.queue(ctx, req, inbox, thread, parent, next, rl)
	if !inboxGone(err) {
		res.Inbox = inbox
	}
	return admission{Result: res}, err
}

// current is the inbox as it is, for a decision taken by a copy of it that
// is not checked by a record: store.ErrInboxChanged if the copy no longer
// holds, a *NotFoundError if the inbox is gone.
func (s *Sender) current(ctx context.Context, copy *store.Inbox) (*store.Inbox, error) {
	in, err := s.asItIs(ctx, copy.ID)
	if err == nil && !in.SameAs(copy) {
		return nil, store.ErrInboxChanged
	}
	return in, err
}

// asItIs reads the inbox as it is now: a *NotFoundError if it is gone.
func (s *Sender) asItIs(ctx context.Context, id string) (*store.Inbox, error) {
	in, err := s.o.Store.Inbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Kind: "Inbox", ID: id}
	}
	return in, err
}

// sizeBound is the most a request's message can weigh on the wire before
// its Markdown is rendered: the text (or the most PlainText derives from
// the HTML), the HTML given or the most the renderer makes of the text,
// and the attachments.
func sizeBound(req SendRequest) int {
	n := len(req.Body) + len(req.HTML)
	switch {
	case req.HTML == "":
		n += render.MaxSize(len(req.Body))
	case req.Body == "":
		n += len(req.HTML)
	}
	for _, a := range req.Attachments {
		n += len(a.Content)
	}
	return n
}

// load fetches the inbox, the reply thread and the message it answers.
func (s *Sender) load(ctx context.Context, req SendRequest) (*store.Inbox, *store.Thread, *store.Message, error) {
	inbox, err := s.loadInbox(ctx, req)
	if err != nil {
		return nil, nil, nil, err
	}
	thread, parent, err := s.loadThread(ctx, req, inbox)
	if err != nil {
		return nil, nil, nil, err
	}
	return inbox, thread, parent, nil
}

// loadInbox is the inbox req is judged by: req.Inbox if it is given, else
// a copy (store.InboxCopy) that the record of the send checks.
func (s *Sender) loadInbox(ctx context.Context, req SendRequest) (*store.Inbox, error) {
	if req.Inbox != nil && req.Inbox.ID == req.InboxID {
		return req.Inbox, nil
	}
	inbox, err := s.o.Store.InboxCopy(ctx, req.InboxID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Kind: "Inbox", ID: req.InboxID}
	}
	return inbox, err
}

// loadThread fetches the thread req answers, if any, and its last
// message: a *NotFoundError unless it is a thread of inbox.
func (s *Sender) loadThread(ctx context.Context, req SendRequest, inbox *store.Inbox) (*store.Thread, *store.Message, error) {
	if req.ReplyToThreadID == "" {
		return nil, nil, nil
	}
	thread, err := s.o.Store.Thread(ctx, req.ReplyToThreadID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && thread.InboxID != inbox.ID) {
		return nil, nil, &NotFoundError{Kind: "Thread", ID: req.ReplyToThreadID}
	}
	if err != nil {
		return nil, nil, err
	}
	parent, err := s.o.Store.LastMessage(ctx, thread.ID)
	if errors.Is(err, store.ErrNotFound) {
		return thread, nil, nil
	}
	return thread, parent, err
}

// inboxGone reports a send refused because its inbox is not found.
func inboxGone(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf) && nf.Kind == "Inbox"
}

// screen refuses a send the domain filter blocks (*BlockedError), or one
// to a recipient on the suppression list (*SuppressedError): before the
// throttle, so that neither takes a slot.
func (s *Sender) screen(ctx context.Context, req SendRequest) error {
	if err := s.checkDomains(ctx, req); err != nil {
		return err
	}
	return s.checkSuppressed(ctx, req)
}

// checkCost refuses a send of more units than a window's limit
// (*throttle.TooLargeError) before a held message is recorded, so that
// none is accepted only to fail at its dispatch. A direct send needs no
// such read: its Reserve refuses the same cost.
func (s *Sender) checkCost(ctx context.Context, req SendRequest, inbox *store.Inbox) error {
	n := s.cost(req)
	if n <= 1 {
		return nil
	}
	snap, err := s.o.Throttle.State(ctx, InboxKey(inbox), InboxOverride(inbox))
	if err != nil {
		return nil // the throttle's own admission decides, or fails
	}
	for _, w := range snap.States() {
		if w.Limit > 0 && n > w.Limit {
			return &throttle.TooLargeError{Window: w.Window, Limit: w.Limit, Cost: n}
		}
	}
	return nil
}

// recipientKeys lists the request's recipients, to, cc and bcc, once each
// in canonical form (address.Key): who the message goes to, as the
// suppression list and a provider's quota see them.
func (req SendRequest) recipientKeys() []string {
	keys := make([]string, 0, len(req.To)+len(req.Cc)+len(req.Bcc))
	for _, list := range [][]address.Address{req.To, req.Cc, req.Bcc} {
		for _, a := range list {
			if k := a.Key(); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	return keys
}

// cost is the units req takes from the throttle's windows: 1, or its
// unique recipients when the throttle counts recipients.
func (s *Sender) cost(req SendRequest) int {
	if s.o.Unit == throttle.UnitRecipient {
		return max(len(req.recipientKeys()), 1)
	}
	return 1
}

// checkSuppressed refuses a send to any recipient, to, cc or bcc, on the
// suppression list. Reply-To receives nothing from us: it is not checked.
func (s *Sender) checkSuppressed(ctx context.Context, req SendRequest) error {
	keys := req.recipientKeys()
	found, err := s.o.Store.Suppressed(ctx, keys)
	if err != nil || len(found) == 0 {
		return err
	}
	slices.SortFunc(found, func(a, b store.Suppression) int {
		return slices.Index(keys, a.Email) - slices.Index(keys, b.Email)
	})
	for _, sp := range found {
		// The domain, as a blocked domain is logged: never the address.
		_, domain, _ := strings.Cut(sp.Email, "@")
		s.o.Logger.InfoContext(ctx, "recipient suppressed", slog.String("domain", domain), slog.String("reason", sp.Reason))
	}
	return &SuppressedError{Suppressed: found}
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
