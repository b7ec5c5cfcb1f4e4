package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"sync"
)

// ErrAnotherServer is a server that would keep a throttle of its own
// beside other servers on the same database: together they would send more
// than the limit.
var ErrAnotherServer = errors.New("another NornWeave server is using this database")

// serverLock keys the session-level advisory lock of the servers on a
// PostgreSQL database ("nornone1"; distinct from the migrations' and the
// shared throttle's keys). A server with the in-memory throttle holds it
// exclusively for its life; servers sharing a throttle backend hold it
// shared. Taking it exclusively therefore succeeds only for a server that
// is alone on the database.
const serverLock int64 = 0x6e6f726e_6f6e6531

// ServerLock is this server's hold on the database: PostgreSQL's advisory
// lock, or on SQLite an exclusive lock on the database file. It ends with
// the process, so a server that dies (kill -9) never blocks its restart.
type ServerLock struct {
	db   *sql.DB
	file *os.File // SQLite: the file holding the flock

	mu   sync.Mutex
	conn *sql.Conn // PostgreSQL: the session holding the lock
	fn   string    // how it is (re)taken: pg_try_advisory_lock or _shared

	once sync.Once
	err  error
}

// LockAlone takes the server lock exclusively, if no other server holds
// it: alone reports whether it did. On PostgreSQL it holds one connection
// out of the pool until Release. On SQLite it locks the database file
// itself (flock), which another path to the same file cannot get past.
func (s *Store) LockAlone(ctx context.Context) (l *ServerLock, alone bool, err error) {
	if s.driver != DriverPostgres {
		return s.lockFile()
	}
	return s.advisory(ctx, "pg_try_advisory_lock")
}

// JoinShared takes the server lock shared, beside the other servers that
// share a throttle backend: joined is false while a server holds it
// exclusively (one with the in-memory throttle, or one starting).
func (s *Store) JoinShared(ctx context.Context) (l *ServerLock, joined bool, err error) {
	if s.driver != DriverPostgres {
		return s.lockFile()
	}
	return s.advisory(ctx, "pg_try_advisory_lock_shared")
}

func (s *Store) advisory(ctx context.Context, fn string) (*ServerLock, bool, error) {
	conn, err := s.sqlDB.Conn(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("store: server lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT "+fn+"($1)", serverLock).Scan(&got); err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("store: server lock: %w", err)
	}
	if !got {
		conn.Close()
		return nil, false, nil
	}
	return &ServerLock{db: s.sqlDB, conn: conn, fn: fn}, true, nil
}

// Share turns an exclusive PostgreSQL lock into a shared one, so that
// other servers sharing the throttle may join: the shared lock is taken
// before the exclusive one is let go, so the server is never without it.
func (l *ServerLock) Share(ctx context.Context) error {
	if l == nil || l.conn == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fn = "pg_try_advisory_lock_shared"
	if _, err := l.conn.ExecContext(ctx, "SELECT pg_advisory_lock_shared($1)", serverLock); err != nil {
		return fmt.Errorf("store: share server lock: %w", err)
	}
	if _, err := l.conn.ExecContext(ctx, "SELECT pg_advisory_unlock($1)", serverLock); err != nil {
		return fmt.Errorf("store: share server lock: %w", err)
	}
	return nil
}

// Hold makes sure the PostgreSQL lock is still held: the session that
// holds it dies with its connection (the database restarted, an
// administrator terminated it), and the lock with it, after which another
// server could take the database that this one believes is its own. Hold
// finds that out (a ping on the session) and takes the lock again, in the
// same mode, on a new session. It returns ErrAnotherServer when a server
// took it meanwhile, and an error when the database does not answer; the
// caller calls it again later. retaken reports that the lock had been lost
// and is held again. Hold is for a ticker, not the send path.
func (l *ServerLock) Hold(ctx context.Context) (retaken bool, err error) {
	if l == nil || l.db == nil {
		return false, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn != nil {
		if l.conn.PingContext(ctx) == nil {
			return false, nil
		}
		l.conn.Close() // its session, and the lock, are gone
		l.conn = nil
	}
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("store: retake server lock: %w", err)
	}
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT "+l.fn+"($1)", serverLock).Scan(&got); err != nil {
		conn.Close()
		return false, fmt.Errorf("store: retake server lock: %w", err)
	}
	if !got {
		conn.Close()
		return false, ErrAnotherServer
	}
	l.conn = conn
	return true, nil
}

// Release gives the lock back; safe to call twice and on nil. A lock whose
// session has died is released already: that is not an error.
func (l *ServerLock) Release() error {
	if l == nil {
		return nil
	}
	l.once.Do(func() {
		if l.file != nil {
			l.err = unlockFile(l.file)
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.conn == nil {
			return
		}
		// Close returns the connection to the pool, where its session
		// lives on: unlock explicitly.
		_, err := l.conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock_all()")
		if cerr := l.conn.Close(); err == nil && cerr != nil {
			l.err = fmt.Errorf("store: release server lock: %w", cerr)
		}
		l.conn = nil
	})
	return l.err
}

// lockFile takes an exclusive lock on the SQLite database file: one
// process's file, whatever path reaches it. An in-memory database has
// nothing to lock.
func (s *Store) lockFile() (*ServerLock, bool, error) {
	if s.path == "" {
		return &ServerLock{}, true, nil
	}
	f, err := os.OpenFile(s.path, os.O_RDWR, 0)
	if err != nil {
		return nil, false, fmt.Errorf("store: lock %s: %w", s.path, err)
	}
	ok, err := lockFile(f)
	if err != nil || !ok {
		f.Close()
		return nil, false, err
	}
	return &ServerLock{file: f}, true, nil
}
