package providers

import (
	"context"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// guardConn is the TCP connection of an SMTP session, below go-mail and
// below TLS (implicit, or STARTTLS, whose tls.Client wraps it): every byte
// and every deadline of the session passes through it. It is where the end
// of an attempt is enforced, because no library above can get around it.
//
// go-mail sets the connection's deadline itself when a transaction starts
// (checkConn: SMTP_TIMEOUT from then), which both overrode the attempt's
// end (a send outliving its throttle lease) and cut a large message short
// (no transfer allowance). While a span is open, guardConn rewrites every
// deadline set through it, and the connection is closed the moment the
// attempt's context is done (its deadline passes, or it is canceled), so
// even a call that sets no deadline cannot outlive it. Between spans (a
// pooled, idle connection) it does nothing.
//
// The close hangs on the context (context.AfterFunc) rather than on a timer
// of the guard's own: resetting a runtime timer to fire earlier than any
// other wakes the network poller, a syscall on every send. Reads and writes
// cost one atomic load on their error path only.
type guardConn struct {
	net.Conn

	mu    sync.Mutex
	end   time.Time   // the open span's end; zero when no span is open or it has no end
	fixed bool        // a transaction: end is the only deadline, whatever is asked
	stop  func() bool // unhooks expire from the span's context; nil when none

	expired atomic.Bool           // the span's context closed the connection
	failure atomic.Pointer[error] // the first read or write error, for wording
}

func newGuardConn(c net.Conn) *guardConn { return &guardConn{Conn: c} }

// beginSetup opens a span for the dial, greeting, STARTTLS and AUTH: the
// library's own deadlines (SMTP_TIMEOUT per exchange) apply, but none
// later than end, ctx's deadline (zero: none), and ctx being done closes
// the connection.
func (g *guardConn) beginSetup(ctx context.Context, end time.Time) { g.begin(ctx, end, false) }

// beginTransaction opens a span for one mail transaction: end is its
// deadline from start to finish, so that go-mail's reset to a bare
// SMTP_TIMEOUT neither extends it past the attempt nor cuts a large
// message short of its transfer allowance. ctx being done closes the
// connection.
func (g *guardConn) beginTransaction(ctx context.Context, end time.Time) error {
	g.begin(ctx, end, true)
	return g.Conn.SetDeadline(end)
}

func (g *guardConn) begin(ctx context.Context, end time.Time, fixed bool) {
	g.failure.Store(nil)
	g.mu.Lock()
	g.end, g.fixed = end, fixed
	g.mu.Unlock()
	g.stop = context.AfterFunc(ctx, g.expire)
}

// finish closes the span and reports whether the connection is still
// usable: false once the attempt's end closed it.
func (g *guardConn) finish() bool {
	stopped := g.stop == nil || g.stop()
	g.stop = nil
	g.mu.Lock()
	g.end, g.fixed = time.Time{}, false
	g.mu.Unlock()
	return stopped && !g.expired.Load()
}

// expire ends the span the hard way: whatever is blocked on the
// connection returns, and nothing more can be written.
func (g *guardConn) expire() {
	g.expired.Store(true)
	_ = g.Conn.Close()
}

// bound is the deadline actually set for a requested one.
func (g *guardConn) bound(t time.Time) time.Time {
	g.mu.Lock()
	end, fixed := g.end, g.fixed
	g.mu.Unlock()
	switch {
	case end.IsZero():
		return t
	case fixed && !t.IsZero() && t.Before(time.Now()):
		return t // a deadline in the past interrupts: honour it
	case fixed, t.IsZero(), t.After(end):
		return end
	}
	return t
}

// SetDeadline implements net.Conn within the open span's bound.
func (g *guardConn) SetDeadline(t time.Time) error { return g.Conn.SetDeadline(g.bound(t)) }

// SetReadDeadline implements net.Conn within the open span's bound.
func (g *guardConn) SetReadDeadline(t time.Time) error { return g.Conn.SetReadDeadline(g.bound(t)) }

// SetWriteDeadline implements net.Conn within the open span's bound.
func (g *guardConn) SetWriteDeadline(t time.Time) error { return g.Conn.SetWriteDeadline(g.bound(t)) }

// Read implements net.Conn.
func (g *guardConn) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	if err != nil {
		err = g.failed("read", err)
	}
	return n, err
}

// Write implements net.Conn.
func (g *guardConn) Write(b []byte) (int, error) {
	n, err := g.Conn.Write(b)
	if err != nil {
		err = g.failed("write", err)
	}
	return n, err
}

// failed records the first failure of the connection, which go-mail's
// errors do not expose, and reports a close by expire as what it is: a
// timeout, not "use of closed network connection".
func (g *guardConn) failed(op string, err error) error {
	if g.expired.Load() {
		err = &net.OpError{Op: op, Net: "tcp", Err: os.ErrDeadlineExceeded}
	}
	g.failure.CompareAndSwap(nil, &err)
	return err
}

// firstFailure is the first read or write error, or nil.
func (g *guardConn) firstFailure() error {
	if p := g.failure.Load(); p != nil {
		return *p
	}
	return nil
}
