package skuld

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/parser"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// countingMarkdown counts renders and runs during, if set, in each.
type countingMarkdown struct {
	goldmark.Markdown
	renders atomic.Int64
	during  func()
}

func (c *countingMarkdown) Convert(src []byte, w io.Writer, opts ...parser.ParseOption) error {
	c.renders.Add(1)
	if c.during != nil {
		c.during()
	}
	return c.Markdown.Convert(src, w, opts...)
}

// A send the throttle refuses costs no rendering (issue 17, item 2): the
// Markdown is rendered after admission.
func TestRefusalCostsNoRendering(t *testing.T) {
	md := &countingMarkdown{Markdown: goldmark.New()}
	st, p := newMemStore(), &fakeProvider{}
	clock := newFakeClock()
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(newLimiter(1), clock), Clock: clock,
		Renderer: &Renderer{md: md}})
	req := SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s", Body: "*hi*"}
	if _, err := s.Send(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	var rl *throttle.RateLimitedError
	if _, err := s.Send(context.Background(), req); !errors.As(err, &rl) {
		t.Fatalf("second send = %v, want refused", err)
	}
	if n := md.renders.Load(); n != 1 {
		t.Errorf("rendered %d times for one admitted and one refused send, want 1", n)
	}
}

// A client that goes away before its message is recorded stops the work:
// nothing is recorded or sent, and the slot is given back.
func TestClientGoneBeforeRecordStopsTheSend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	md := &countingMarkdown{Markdown: goldmark.New(), during: cancel}
	st, p := newMemStore(), &fakeProvider{}
	lim, clock := newLimiter(5), newFakeClock()
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, clock), Clock: clock,
		Renderer: &Renderer{md: md}})
	_, err := s.Send(ctx, SendRequest{InboxID: "ib1", To: address.MustParseList("b@x.test"), Subject: "s", Body: "x"})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Send with the client gone mid-render = %v, want context.Canceled", err)
	}
	if st.count() != 0 || len(p.sent) != 0 {
		t.Errorf("recorded %d, sent %d; want nothing", st.count(), len(p.sent))
	}
	if w := globalMinute(lim); w.Used+w.InFlight != 0 {
		t.Errorf("throttle = %+v, want the slot given back", w)
	}
}
