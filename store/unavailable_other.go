//go:build !unix

package store

import "net"

// pendingOrClosed cannot peek here without reading; pgx's idle ping is
// the only check.
func pendingOrClosed(net.Conn) bool { return false }
