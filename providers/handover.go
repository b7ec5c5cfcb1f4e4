package providers

import "context"

// HandoverTrace is told when a send has to wait for the provider, and
// when it holds its connection or concurrency slot, so that whoever keeps
// the send's record can tell a send whose bytes may have gone from one
// that was still waiting when its server died. Each provider calls it the
// same way, from the one place where it waits for a slot (claim); for a
// provider that never waits (Demo), its caller calls HandedOver before
// Send (HandoverReporter).
//
// It travels on the context, as net/http/httptrace's ClientTrace does:
// it observes a moment inside Send without changing what Send returns.
type HandoverTrace struct {
	// Waiting is called before the send waits for a slot, when none is
	// free at once. Its failure to record the wait is its own to report.
	Waiting func()
	// HandedOver is called once the send holds its slot, whether it
	// waited or not, before any byte of the message is written. An error
	// stops the send, not sent: the record would otherwise say that bytes
	// going out could not have.
	HandedOver func() error
}

// HandoverReporter is a provider that calls the context's HandoverTrace
// itself, from the place where it waits for a connection or a concurrency
// slot. The caller calls HandedOver before Send for one that does not (it
// never waits: Demo, a test's fake).
type HandoverReporter interface {
	ReportsHandover()
}

// ReportsHandover implements HandoverReporter.
func (*SMTP) ReportsHandover() {}

// ReportsHandover implements HandoverReporter for the HTTP providers.
func (*httpBase) ReportsHandover() {}

// HandoverOf returns the HandoverTrace ctx carries, or nil.
func HandoverOf(ctx context.Context) *HandoverTrace {
	t, _ := ctx.Value(handoverKey{}).(*HandoverTrace)
	return t
}

type handoverKey struct{}

// WithHandoverTrace returns ctx carrying t, which a provider's Send calls.
func WithHandoverTrace(ctx context.Context, t *HandoverTrace) context.Context {
	return context.WithValue(ctx, handoverKey{}, t)
}

// claim takes one of slots: at once if one is free; otherwise it tells
// ctx's HandoverTrace that the send waits and blocks in wait, which
// returns nil holding a slot. Holding one, it tells the trace the send is
// handed over. On an error it holds no slot; provider names it in the
// error of a hand-over that could not be recorded.
func claim(ctx context.Context, provider string, slots chan struct{}, wait func() error) error {
	t := HandoverOf(ctx)
	select {
	case slots <- struct{}{}:
	default:
		if t != nil && t.Waiting != nil {
			t.Waiting()
		}
		if err := wait(); err != nil {
			return err
		}
	}
	if t != nil && t.HandedOver != nil {
		if err := t.HandedOver(); err != nil {
			<-slots
			return &SendError{Temporary: true, Err: err, cause: CauseUnknown,
				msg: provider + ": not sent: its hand-over to the provider could not be recorded"}
		}
	}
	return nil
}
