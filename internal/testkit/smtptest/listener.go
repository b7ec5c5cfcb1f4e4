package smtptest

import (
	"crypto/tls"
	"net"
	"sync"
)

// trackingListener counts accepted connections and keeps the open ones, so
// the server can drop them on demand and wait for them to end; go-smtp does
// not expose its own set.
type trackingListener struct {
	net.Listener
	s *Server

	mu      sync.Mutex
	total   int
	open    map[*trackedConn]struct{}
	closed  bool
	changed chan struct{} // closed and replaced whenever a connection ends
}

func newTrackingListener(l net.Listener, s *Server) *trackingListener {
	return &trackingListener{Listener: l, s: s, open: make(map[*trackedConn]struct{}), changed: make(chan struct{})}
}

// Accept implements net.Listener.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
	l.s.accepted(tc)
	l.mu.Lock()
	l.total++
	closed := l.closed
	if !closed {
		l.open[tc] = struct{}{}
	}
	l.mu.Unlock()
	if closed {
		// Accepted in the instant the server was stopping: the handler
		// sees a closed connection and exits at once.
		c.Close()
	}
	return tc, nil
}

// Close implements net.Listener; connections accepted afterwards are closed.
func (l *trackingListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.Listener.Close()
}

func (l *trackingListener) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total
}

// closeAll closes every open connection.
func (l *trackingListener) closeAll() {
	l.mu.Lock()
	conns := make([]*trackedConn, 0, len(l.open))
	for c := range l.open {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// idle returns the number of open connections and a channel closed when
// that number next changes.
func (l *trackingListener) idle() (int, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.open), l.changed
}

func (l *trackingListener) forget(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, c)
	close(l.changed)
	l.changed = make(chan struct{})
}

// trackedConn removes itself from its listener's open set when closed, and
// carries the hooks of the stages that act below go-smtp: the first write
// (the greeting) and the read of the command after RCPT TO.
type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once

	// Set before the handler starts, or by the session on the handler's
	// goroutine, which does every Read and Write: no lock needed.
	beforeWrite func() // run once, before the first Write
	beforeRead  func() // run once, before the next Read
}

// Read implements net.Conn.
func (c *trackedConn) Read(b []byte) (int, error) {
	if f := c.beforeRead; f != nil {
		c.beforeRead = nil
		f()
	}
	return c.Conn.Read(b)
}

// Write implements net.Conn.
func (c *trackedConn) Write(b []byte) (int, error) {
	if f := c.beforeWrite; f != nil {
		c.beforeWrite = nil
		f()
	}
	return c.Conn.Write(b)
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}

// reset aborts the connection with a TCP RST instead of a FIN.
func (c *trackedConn) reset() {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	c.Close()
}

// trackedOf finds the tracked connection under a go-smtp connection, which
// may be wrapped in TLS (implicit, or after STARTTLS).
func trackedOf(nc net.Conn) *trackedConn {
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	tc, _ := nc.(*trackedConn)
	return tc
}
