package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrUnavailable is returned when the database cannot be reached: the
// connection was lost during the call, or no new one could be made. The
// call may be repeated later; the API answers 503 with Retry-After.
var ErrUnavailable = errors.New("store: database unavailable")

// lostConnection reports an error that says the database went away rather
// than what was asked of it: the connection was refused, reset or closed,
// the server terminated the session (an administrator, a restart: SQLSTATE
// 57P01-57P03), or it reported a connection exception (class 08) or too
// many connections. A cancelled or expired context is the caller's, not
// the database's, and is not one.
func lostConnection(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) {
		return true // whatever the server said, no session could be had
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P") || pgErr.Code == "53300"
	}
	var netErr net.Error
	return errors.As(err, &netErr) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "conn closed")
}

// checkBeforeUse is the pool's test of a connection it is about to hand
// out: pgx pings one idle for more than a second, and also (here) one on
// which the server has already said something, or that the server has
// closed. An idle session receives nothing unasked, so whatever arrived is
// the goodbye of a terminated backend (FATAL 57P01), found out before
// anything is written on the connection. A failed ping makes database/sql
// throw the connection away and take another, or open a new one: the
// "retry" that cannot send anything twice.
func checkBeforeUse(_ context.Context, p stdlib.ShouldPingParams) bool {
	return p.IdleDuration > pingAfterIdle || saidSomething(p.Conn)
}

// pingAfterIdle is pgx's own default: a connection idle longer is pinged
// whatever.
const pingAfterIdle = time.Second

func saidSomething(c *pgx.Conn) bool {
	if c == nil || c.PgConn() == nil {
		return false
	}
	nc := c.PgConn().Conn()
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok { // TLS: what arrived is a record
		nc = tc.NetConn()
	}
	return pendingOrClosed(nc)
}
