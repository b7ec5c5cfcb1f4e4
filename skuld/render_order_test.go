package skuld

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/skuld/render"
	"github.com/nornweave/nornweave/skuld/throttle"
)

// countingRenderer counts renders and runs during, if set, in each.
type countingRenderer struct {
	renders atomic.Int64
	during  func()
}

func (c *countingRenderer) Render(ctx context.Context, markdown string) (string, error) {
	c.renders.Add(1)
	if c.during != nil {
		c.during()
	}
	return render.New().Render(ctx, markdown)
}

// A send the throttle refuses costs no rendering (issue 17, item 2): the
// Markdown is rendered after admission.
func TestRefusalCostsNoRendering(t *testing.T) {
	md := &countingRenderer{}
	st, p := newMemStore(), &fakeProvider{}
	clock := newFakeClock()
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(newLimiter(1), clock), Clock: clock,
		Renderer: md})
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
	md := &countingRenderer{during: cancel}
	st, p := newMemStore(), &fakeProvider{}
	lim, clock := newLimiter(5), newFakeClock()
	s := NewSender(Options{Store: st, Provider: p, Throttle: throttle.NewMemory(lim, clock), Clock: clock,
		Renderer: md})
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
