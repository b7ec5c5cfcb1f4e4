//go:build unix

package store

import (
	"net"
	"syscall"
)

// pendingOrClosed reports whether bytes wait to be read on c, or its peer
// has closed it, without reading them or waiting: one non-blocking peek.
func pendingOrClosed(c net.Conn) bool {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	var (
		peekErr error
		buf     [1]byte
	)
	// Control, not Read: Read takes the descriptor's read lock, which pgx's
	// background reader may hold, parked in a read of its own, for as long
	// as the session is idle. The peek neither waits nor takes anything
	// from the socket, so it needs no lock.
	if err := rc.Control(func(fd uintptr) {
		_, _, peekErr = syscall.Recvfrom(int(fd), buf[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	}); err != nil {
		return true
	}
	switch {
	case peekErr == syscall.EAGAIN || peekErr == syscall.EWOULDBLOCK:
		return false // nothing there: the session is as we left it
	case peekErr != nil:
		return true
	}
	return true // a byte is there, or (none read, no error) the peer closed it
}
