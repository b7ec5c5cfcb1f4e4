package smtptest

import (
	"net"
	"sync"
)

// trackingListener counts accepted connections and keeps the open ones, so
// the server can drop them on demand; go-smtp does not expose its own set.
type trackingListener struct {
	net.Listener

	mu     sync.Mutex
	total  int
	open   map[*trackedConn]struct{}
	closed bool
}

func newTrackingListener(l net.Listener) *trackingListener {
	return &trackingListener{Listener: l, open: make(map[*trackedConn]struct{})}
}

// Accept implements net.Listener.
func (l *trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	tc := &trackedConn{Conn: c, l: l}
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

func (l *trackingListener) forget(c *trackedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.open, c)
}

// trackedConn removes itself from its listener's open set when closed.
type trackedConn struct {
	net.Conn
	l    *trackingListener
	once sync.Once
}

// Close implements net.Conn.
func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.forget(c) })
	return err
}
