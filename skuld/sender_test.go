package skuld

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// memStore is a hand-written fake of the pipeline's Store. The real stores
// are exercised end to end in tests/; here it lets us see exactly what the
// pipeline wrote and in which order.
type memStore struct {
	mu       sync.Mutex
	inboxes  map[string]*store.Inbox
	threads  map[string]*store.Thread
	messages []*store.Message
	slots    map[string]*store.SendSlot
	outcomes map[string]store.Outcome
	// marks are the hand-over writes, in order: "waiting <id>" and
	// "handed over <id>"; marked, when set, is told each.
	marks  []string
	marked func(string)
	// suppressed is the suppression list, by canonical address.
	suppressed map[string]store.Suppression
}

func newMemStore() *memStore {
	return &memStore{
		inboxes:  map[string]*store.Inbox{"ib1": {ID: "ib1", EmailAddress: "agent@acme.test", Name: "Agent"}},
		threads:  map[string]*store.Thread{},
		slots:    map[string]*store.SendSlot{},
		outcomes: map[string]store.Outcome{},
	}
}

func (s *memStore) Inbox(_ context.Context, id string) (*store.Inbox, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in, ok := s.inboxes[id]; ok {
		return in, nil
	}
	return nil, store.ErrNotFound
}

// InboxCopy: one server's store, whose copies are always current.
func (s *memStore) InboxCopy(ctx context.Context, id string) (*store.Inbox, error) {
	return s.Inbox(ctx, id)
}

func (s *memStore) Thread(_ context.Context, id string) (*store.Thread, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if t, ok := s.threads[id]; ok {
		return t, nil
	}
	return nil, store.ErrNotFound
}

func (s *memStore) LastMessage(_ context.Context, threadID string) (*store.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.messages) - 1; i >= 0; i-- {
		if s.messages[i].ThreadID == threadID {
			return s.messages[i], nil
		}
	}
	return nil, store.ErrNotFound
}

func (s *memStore) CreateMessage(_ context.Context, m *store.Message, _ []store.Attachment, t *store.Thread, slot *store.SendSlot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.Status != store.StatusSending {
		return errors.New("message must be recorded as sending first")
	}
	if slot == nil || !slot.Deadline.After(slot.ReservedAt) {
		return errors.New("a send must be recorded with its slot and a deadline after its reservation")
	}
	s.slots[m.ID] = slot
	if t != nil {
		s.threads[t.ID] = t
	}
	cp := *m
	s.messages = append(s.messages, &cp)
	return nil
}

func (s *memStore) UpdateMessageOutcome(_ context.Context, id string, o store.Outcome) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.outcomes[id] = o
	return nil
}

func (s *memStore) MarkSendWaiting(_ context.Context, id string) error {
	return s.mark(id, "waiting", true)
}

func (s *memStore) MarkSendHandedOver(_ context.Context, id string) error {
	return s.mark(id, "handed over", false)
}

func (s *memStore) Suppressed(_ context.Context, emails []string) ([]store.Suppression, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Suppression
	for _, e := range emails {
		if sp, ok := s.suppressed[e]; ok {
			out = append(out, sp)
		}
	}
	return out, nil
}

func (s *memStore) mark(id, what string, waiting bool) error {
	s.mu.Lock()
	sl, ok := s.slots[id]
	if ok {
		sl.Waiting = waiting
		s.marks = append(s.marks, what+" "+id)
	}
	marked := s.marked
	s.mu.Unlock()
	if !ok {
		return store.ErrNotFound
	}
	if marked != nil {
		marked(what + " " + id)
	}
	return nil
}

func (s *memStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.messages)
}

// fakeProvider records what it was asked to send; err makes it fail, errs
// makes the next attempts fail in turn, panics makes it panic, and block,
// when set, holds every send until closed.
type fakeProvider struct {
	mu       sync.Mutex
	sent     []providers.Message
	attempts int
	err      error
	errs     []error
	panics   bool
	block    chan struct{}
	start    chan struct{}
}

func (p *fakeProvider) Name() string { return "fake" }

func (p *fakeProvider) Send(ctx context.Context, m providers.Message) (string, error) {
	if p.start != nil {
		p.start <- struct{}{}
	}
	if p.block != nil {
		<-p.block
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.attempts++
	if p.panics {
		panic("provider bug")
	}
	if len(p.errs) > 0 {
		err := p.errs[0]
		p.errs = p.errs[1:]
		return "", err
	}
	if p.err != nil {
		return "", p.err
	}
	p.sent = append(p.sent, m)
	return "prov-" + m.MessageID, ctx.Err()
}

func newFakeClock() *clocktest.Clock {
	return clocktest.New(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
}

// newTestSender returns a Sender on the in-memory throttle (perMinute
// sends a minute, global) and a fake clock.
func newTestSender(t *testing.T, st Store, p *fakeProvider, perMinute int, policy *filter.Filter) (*Sender, *throttle.GlobalRateLimiter) {
	t.Helper()
	lim, clock := newLimiter(perMinute), newFakeClock()
	return NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, clock), Filter: policy,
		Clock: clock, RetryMax: 3, RetryBackoff: time.Millisecond}), lim
}

func newLimiter(perMinute int) *throttle.GlobalRateLimiter {
	return throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: perMinute}, throttle.Limits{})
}

// globalMinute is the limiter's global minute window, read at its start.
func globalMinute(lim *throttle.GlobalRateLimiter) throttle.WindowState {
	return lim.State(0, "", throttle.Override{}).Global.PerMinute
}

// sendMsg sends req and returns the recorded message.
func sendMsg(s *Sender, ctx context.Context, req SendRequest) (*store.Message, error) {
	res, err := s.Send(ctx, req)
	return res.Message, err
}

func TestSendRecordsAndSends(t *testing.T) {
	st, p := newMemStore(), &fakeProvider{}
	s, lim := newTestSender(t, st, p, 5, nil)
	m, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("Bob <bob@x.test>"),
		Subject: "Hi", Body: "**bold**"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if m.Status != store.StatusSent || m.ProviderMessageID == nil || m.SentAt == nil {
		t.Fatalf("got %+v, want status sent with provider id and sent_at", m)
	}
	if got := st.outcomes[m.ID].Status; got != store.StatusSent {
		t.Errorf("recorded outcome = %q, want sent", got)
	}
	if len(p.sent) != 1 || !strings.Contains(p.sent[0].HTML, "<strong>bold</strong>") {
		t.Fatalf("provider got %+v, want one message with rendered HTML", p.sent)
	}
	if want := "<" + m.ID + "@acme.test>"; p.sent[0].MessageID != want {
		t.Errorf("Message-ID = %q, want %q", p.sent[0].MessageID, want)
	}
	if got := globalMinute(lim).Used; got != 1 {
		t.Errorf("throttle used = %d, want 1", got)
	}
}

func TestSendProviderFailureGivesSlotBack(t *testing.T) {
	st, p := newMemStore(), &fakeProvider{err: &providers.SendError{Code: 554, Err: errors.New("smtp: message rejected at 10.0.0.5:25: 554 no")}}
	s, lim := newTestSender(t, st, p, 1, nil)
	m, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if m.Status != store.StatusFailed || m.Error == nil || !strings.Contains(*m.Error, "554") || strings.Contains(*m.Error, "10.0.0.5") {
		t.Fatalf("got status %q error %v, want failed with the reply code and no relay address", m.Status, m.Error)
	}
	st1 := globalMinute(lim)
	if p.attempts != 1 {
		t.Errorf("provider attempts = %d, want 1: a permanent failure is not retried", p.attempts)
	}
	if st1.Used != 0 || st1.InFlight != 0 {
		t.Errorf("throttle after failure = %+v, want nothing counted", st1)
	}
	p.err = nil
	if m, err = sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}); err != nil || m.Status != store.StatusSent {
		t.Fatalf("next send at the limit = %v, %v; want sent", m, err)
	}
}

func TestSendStopsEarly(t *testing.T) {
	policy, err := filter.New("", `evil\.test`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  SendRequest
		want func(error) bool
	}{
		{"unknown inbox", SendRequest{InboxID: "nope", To: address.MustParseList("a@x.test"), Subject: "s"},
			func(err error) bool { var nf *NotFoundError; return errors.As(err, &nf) && nf.Kind == "Inbox" }},
		{"unknown thread", SendRequest{InboxID: "ib1", To: address.MustParseList("a@x.test"), Subject: "s", ReplyToThreadID: "t0"},
			func(err error) bool { var nf *NotFoundError; return errors.As(err, &nf) && nf.Kind == "Thread" }},
		{"blocked bcc", SendRequest{InboxID: "ib1", To: address.MustParseList("a@x.test"), Bcc: address.MustParseList("z@EVIL.test", "y@evil.test"), Subject: "s"},
			func(err error) bool {
				var b *BlockedError
				return errors.As(err, &b) && b.Error() == "Recipient domain(s) blocked by outbound policy: evil.test"
			}},
		// Checked in canonical form, in the request's order, once per
		// address; Reply-To is not a recipient.
		{"suppressed cc and bcc", SendRequest{InboxID: "ib1", To: address.MustParseList("a@x.test"), Cc: address.MustParseList("Gone@X.test"),
			Bcc: address.MustParseList("spam@y.test", "gone@x.test"), ReplyTo: address.MustParseList("manual@x.test"), Subject: "s"},
			func(err error) bool {
				var sp *SuppressedError
				return errors.As(err, &sp) && sp.Error() == "Recipient(s) on the suppression list: gone@x.test (bounce), spam@y.test (complaint)"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, p := newMemStore(), &fakeProvider{}
			st.suppressed = map[string]store.Suppression{
				"spam@y.test":   {Email: "spam@y.test", Reason: store.ReasonComplaint},
				"gone@x.test":   {Email: "gone@x.test", Reason: store.ReasonBounce},
				"manual@x.test": {Email: "manual@x.test", Reason: store.ReasonManual},
			}
			s, lim := newTestSender(t, st, p, 5, policy)
			_, err := s.Send(context.Background(), tt.req)
			if !tt.want(err) {
				t.Fatalf("Send() error = %v", err)
			}
			if st.count() != 0 || len(p.sent) != 0 {
				t.Errorf("recorded %d, sent %d; want nothing", st.count(), len(p.sent))
			}
			if w := globalMinute(lim); w.Used+w.InFlight != 0 {
				t.Errorf("throttle = %+v, want untouched", w)
			}
		})
	}
}

func TestReplyCarriesThreadingHeaders(t *testing.T) {
	st, p := newMemStore(), &fakeProvider{}
	s, _ := newTestSender(t, st, p, 0, nil)
	first, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
	if err != nil {
		t.Fatal(err)
	}
	second, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"),
		Subject: "Re: s", ReplyToThreadID: first.ThreadID})
	if err != nil {
		t.Fatal(err)
	}
	third, err := sendMsg(s, context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"),
		Subject: "Re: s", ReplyToThreadID: first.ThreadID})
	if err != nil {
		t.Fatal(err)
	}
	if second.ThreadID != first.ThreadID || third.ThreadID != first.ThreadID {
		t.Fatalf("replies went to threads %s, %s; want %s", second.ThreadID, third.ThreadID, first.ThreadID)
	}
	got := p.sent[2]
	if got.InReplyTo != second.MessageIDHeader {
		t.Errorf("In-Reply-To = %q, want %q", got.InReplyTo, second.MessageIDHeader)
	}
	want := []string{first.MessageIDHeader, second.MessageIDHeader}
	if strings.Join(got.References, " ") != strings.Join(want, " ") {
		t.Errorf("References = %v, want %v", got.References, want)
	}
}

func TestReferencesAreBounded(t *testing.T) {
	parent := &store.Message{MessageIDHeader: "<p@x>"}
	for i := 0; i < 30; i++ {
		parent.References = append(parent.References, "<"+string(rune('a'+i%26))+"@x>")
	}
	refs := references(parent)
	if len(refs) != maxReferences || refs[0] != parent.References[0] || refs[len(refs)-1] != "<p@x>" {
		t.Fatalf("references = %v, want %d keeping the first and ending with the parent", refs, maxReferences)
	}
}

func TestShutdownDrainsInFlightSends(t *testing.T) {
	st := newMemStore()
	p := &fakeProvider{block: make(chan struct{}), start: make(chan struct{}, 1)}
	s, _ := newTestSender(t, st, p, 0, nil)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *store.Message)
	go func() {
		m, _ := sendMsg(s, ctx, SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
		done <- m
	}()
	<-p.start
	cancel() // the client goes away mid-send: the send must still finish

	shut := make(chan error)
	go func() { shut <- s.Shutdown(context.Background()) }()
	// Until Shutdown has begun, an unknown inbox is simply not found; after,
	// every send is refused up front.
	for {
		_, err := s.Send(context.Background(), SendRequest{InboxID: "nope"})
		if errors.Is(err, ErrShuttingDown) {
			break
		}
		var nf *NotFoundError
		if !errors.As(err, &nf) {
			t.Fatalf("Send while shutting down = %v", err)
		}
		runtime.Gosched()
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before the in-flight send finished", err)
	default:
	}
	close(p.block)
	if m := <-done; m == nil || m.Status != store.StatusSent {
		t.Fatalf("in-flight send = %+v, want recorded as sent", m)
	}
	if err := <-shut; err != nil {
		t.Fatalf("Shutdown = %v", err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatalf("second Shutdown = %v", err)
	}
}

// vanishingStore loses the inbox between the load and the write, as when
// the inbox is deleted while a send is in flight.
type vanishingStore struct{ *memStore }

func (vanishingStore) CreateMessage(context.Context, *store.Message, []store.Attachment, *store.Thread, *store.SendSlot) error {
	return fmt.Errorf("store: create message: %w", store.ErrNotFound)
}

func TestSendFromInboxDeletedMeanwhile(t *testing.T) {
	st, p := vanishingStore{newMemStore()}, &fakeProvider{}
	lim := newLimiter(1)
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, newFakeClock())})
	_, err := s.Send(context.Background(), SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"})
	var nf *NotFoundError
	if !errors.As(err, &nf) || nf.Kind != "Inbox" {
		t.Fatalf("Send = %v, want Inbox not found", err)
	}
	if w := globalMinute(lim); w.Used+w.InFlight != 0 || len(p.sent) != 0 {
		t.Errorf("throttle %+v, sent %d; want nothing taken, nothing sent", w, len(p.sent))
	}
}

// changingStore is a shared database's store whose inbox is changed on
// another server while sends are judged: the first `changes` records find
// the copy they were judged by out of date, as store.CreateMessage does,
// and the copy is then the inbox as it is (per-minute limit `limit`).
type changingStore struct {
	*memStore
	changes, limit int
	judgedBy       []*int // the per-minute limit of each copy a record was judged by
}

func (s *changingStore) CreateMessage(ctx context.Context, m *store.Message, atts []store.Attachment, t *store.Thread, slot *store.SendSlot) error {
	s.mu.Lock()
	s.judgedBy = append(s.judgedBy, slot.JudgedBy.RateLimitPerMinute)
	stale := s.changes > 0
	if stale {
		s.changes--
		s.inboxes["ib1"] = &store.Inbox{ID: "ib1", EmailAddress: "agent@acme.test", RateLimitPerMinute: &s.limit}
	}
	s.mu.Unlock()
	if stale {
		return fmt.Errorf("store: create message: %w", store.ErrInboxChanged)
	}
	return s.memStore.CreateMessage(ctx, m, atts, t, slot)
}

// A send whose record finds its copy of the inbox out of date gives its
// slot back and is judged again by the inbox as it is; after
// maxInboxChanges such findings it gives up with nothing sent or taken.
func TestSendJudgedAgainWhenItsInboxChanged(t *testing.T) {
	req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s"}
	t.Run("once", func(t *testing.T) {
		st, p := &changingStore{memStore: newMemStore(), changes: 1, limit: 7}, &fakeProvider{}
		s, lim := newTestSender(t, st, p, 10, nil)
		m, err := sendMsg(s, context.Background(), req)
		if err != nil || m.Status != store.StatusSent {
			t.Fatalf("Send = %+v, %v; want sent", m, err)
		}
		if len(st.judgedBy) != 2 || st.judgedBy[0] != nil || st.judgedBy[1] == nil || *st.judgedBy[1] != 7 {
			t.Fatalf("records judged by per-minute limits %v, want the default, then 7", st.judgedBy)
		}
		if w := globalMinute(lim); w.Used != 1 || w.InFlight != 0 || len(p.sent) != 1 {
			t.Errorf("throttle %+v, sent %d; want one taken, one sent", w, len(p.sent))
		}
	})
	t.Run("every time", func(t *testing.T) {
		st, p := &changingStore{memStore: newMemStore(), changes: 100, limit: 7}, &fakeProvider{}
		s, lim := newTestSender(t, st, p, 10, nil)
		_, err := s.Send(context.Background(), req)
		if !errors.Is(err, store.ErrInboxChanged) || len(st.judgedBy) != maxInboxChanges {
			t.Fatalf("Send = %v after %d records, want store.ErrInboxChanged after %d", err, len(st.judgedBy), maxInboxChanges)
		}
		if w := globalMinute(lim); w.Used+w.InFlight != 0 || len(p.sent) != 0 {
			t.Errorf("throttle %+v, sent %d; want nothing taken, nothing sent", w, len(p.sent))
		}
	})
}

// readCounter counts the pipeline's reads of the inbox.
type readCounter struct {
	*memStore
	reads int
}

func (s *readCounter) Inbox(ctx context.Context, id string) (*store.Inbox, error) {
	s.reads++
	return s.memStore.Inbox(ctx, id)
}

func (s *readCounter) InboxCopy(ctx context.Context, id string) (*store.Inbox, error) {
	s.reads++
	return s.memStore.InboxCopy(ctx, id)
}

// Result.Inbox is the inbox a send was judged by, with an error decided
// once it was loaded too, and nil when it is not found; a send given its
// inbox (SendRequest.Inbox) is judged by that copy without reading it.
func TestSendNamesTheInboxItJudgedBy(t *testing.T) {
	policy, err := filter.New("", `evil\.test`)
	if err != nil {
		t.Fatal(err)
	}
	given := &store.Inbox{ID: "ib1", EmailAddress: "agent@acme.test", Name: "Agent"}
	to := address.MustParseList("a@x.test")
	for _, tt := range []struct {
		name      string
		req       SendRequest
		full      bool // the throttle's window is full
		wantErr   bool
		wantInbox bool
		wantReads int
	}{
		{"sent", SendRequest{InboxID: "ib1", To: to, Subject: "s"}, false, false, true, 1},
		{"sent, inbox given", SendRequest{InboxID: "ib1", Inbox: given, To: to, Subject: "s"}, false, false, true, 0},
		{"blocked", SendRequest{InboxID: "ib1", Inbox: given, To: address.MustParseList("z@evil.test"), Subject: "s"}, false, true, true, 0},
		{"unknown thread", SendRequest{InboxID: "ib1", Inbox: given, To: to, Subject: "s", ReplyToThreadID: "t0"}, false, true, true, 0},
		// A refusal by a copy is confirmed by the inbox as it is.
		{"rate limited", SendRequest{InboxID: "ib1", Inbox: given, To: to, Subject: "s"}, true, true, true, 1},
		{"unknown inbox", SendRequest{InboxID: "nope", To: to, Subject: "s"}, false, true, false, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, p := &readCounter{memStore: newMemStore()}, &fakeProvider{}
			s, _ := newTestSender(t, st, p, 1, policy)
			if tt.full {
				if _, err := s.Send(context.Background(), SendRequest{InboxID: "ib1", To: to, Subject: "s"}); err != nil {
					t.Fatal(err)
				}
				st.reads = 0
			}
			res, err := s.Send(context.Background(), tt.req)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Send = %v, want an error: %v", err, tt.wantErr)
			}
			switch {
			case !tt.wantInbox && res.Inbox != nil:
				t.Errorf("Result.Inbox = %+v, want nil", res.Inbox)
			case tt.wantInbox && (res.Inbox == nil || res.Inbox.ID != "ib1"):
				t.Errorf("Result.Inbox = %+v, want ib1", res.Inbox)
			case tt.wantInbox && tt.req.Inbox != nil && res.Inbox != tt.req.Inbox:
				t.Errorf("Result.Inbox = %p, want the copy the send was given, %p", res.Inbox, tt.req.Inbox)
			}
			if st.reads != tt.wantReads {
				t.Errorf("the inbox was read %d times, want %d", st.reads, tt.wantReads)
			}
		})
	}
}
