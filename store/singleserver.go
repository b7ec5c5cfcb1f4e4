package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
)

// ErrAnotherServer is a second server with the in-memory throttle on a
// PostgreSQL database that one already uses: each would have its own full
// quota, and together they would send more than the limit.
var ErrAnotherServer = errors.New("another NornWeave server with THROTTLE_BACKEND=memory is using this database; " +
	"to run several servers on one database set THROTTLE_BACKEND=postgres or THROTTLE_BACKEND=redis on all of them")

// singleServerLock keys the session-level advisory lock a memory-throttle
// server holds on PostgreSQL; distinct from the migrations' and the shared
// throttle's keys.
const singleServerLock int64 = 0x6e6f726e_6f6e6531 // "nornone1"

// ServerLock is the lock SingleServer took; Release gives it back.
type ServerLock struct {
	conn *sql.Conn
	once sync.Once
	err  error
}

// SingleServer takes, for the life of the process, a session-level advisory
// lock saying that a server with the in-memory throttle uses this database,
// or returns ErrAnotherServer if one already does. It holds one connection
// out of the pool until Release; the lock ends with that session, so a
// server that dies (kill -9) frees it as soon as PostgreSQL notices. On SQLite, one process's
// file, it returns a lock that holds nothing.
func (s *Store) SingleServer(ctx context.Context) (*ServerLock, error) {
	if s.driver != "postgres" {
		return &ServerLock{}, nil
	}
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: single-server lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", singleServerLock).Scan(&got); err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: single-server lock: %w", err)
	}
	if !got {
		conn.Close()
		return nil, ErrAnotherServer
	}
	return &ServerLock{conn: conn}, nil
}

// Release gives the lock back; safe to call twice and on nil.
func (l *ServerLock) Release() error {
	if l == nil || l.conn == nil {
		return nil
	}
	l.once.Do(func() {
		// Close returns the connection to the pool, where its session
		// lives on: unlock explicitly.
		_, _ = l.conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", singleServerLock)
		if err := l.conn.Close(); err != nil {
			l.err = fmt.Errorf("store: release single-server lock: %w", err)
		}
	})
	return l.err
}
