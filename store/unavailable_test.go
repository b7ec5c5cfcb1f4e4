package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	neturl "net/url"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
)

func TestLostConnection(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		lost bool
	}{
		{&pgconn.PgError{Severity: "FATAL", Code: "57P01"}, true}, // terminated by an administrator
		{&pgconn.PgError{Code: "57P02"}, true},
		{&pgconn.PgError{Code: "57P03"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "53300"}, true},
		{fmt.Errorf("query: %w", &pgconn.PgError{Code: "57P01"}), true},
		{&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, true},
		{io.ErrUnexpectedEOF, true},
		{driver.ErrBadConn, true},
		{&pgconn.PgError{Code: "23505"}, false}, // a unique violation is an answer
		{&pgconn.PgError{Code: "22021"}, false},
		{context.Canceled, false},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), false},
		{gorm.ErrRecordNotFound, false},
		{errors.New("no such table: inboxes"), false},
	} {
		if got := lostConnection(tt.err); got != tt.lost {
			t.Errorf("lostConnection(%v) = %v, want %v", tt.err, got, tt.lost)
		}
		if got := errors.Is(wrap(tt.err, "x"), ErrUnavailable); got != tt.lost {
			t.Errorf("wrap(%v) is ErrUnavailable: %v, want %v", tt.err, got, tt.lost)
		}
	}
}

// After PostgreSQL terminates the pool's connections, each is found dead
// before anything is written on it and the call runs on a new one; while
// the database refuses connections, calls fail with ErrUnavailable.
func TestTerminatedConnectionsAreReplaced(t *testing.T) {
	t.Parallel()
	url := migratedDSN(t, DriverPostgres)
	s := openWith(t, Options{Driver: DriverPostgres, DSN: url})
	ctx := context.Background()
	admin, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	var db string
	if err := admin.QueryRow("SELECT current_database()").Scan(&db); err != nil {
		t.Fatal(err)
	}
	terminate := func() {
		t.Helper()
		if _, err := admin.Exec(`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, db); err != nil {
			t.Fatal(err)
		}
	}
	in := &Inbox{EmailAddress: "a@x.test", Name: "n", CreatedAt: t0}
	if err := s.CreateInbox(ctx, in); err != nil {
		t.Fatal(err)
	}
	terminate() // the store's connections, and admin's own: it reconnects
	for range 3 {
		if _, err := s.Inboxes(ctx, 0, 0); err != nil {
			t.Fatalf("Inboxes after the connections were terminated: %v", err)
		}
	}
	// From a connection to another database: this one is about to refuse them.
	u, _ := neturl.Parse(url)
	u.Path = "/postgres"
	other, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	if _, err := other.Exec(`ALTER DATABASE "` + db + `" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Exec(`SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = $1`, db); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inboxes(ctx, 0, 0); !errors.Is(err, ErrUnavailable) {
		t.Errorf("Inboxes with the database refusing connections = %v, want ErrUnavailable", err)
	}
	if _, err := other.Exec(`ALTER DATABASE "` + db + `" ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Inboxes(ctx, 0, 0); err != nil {
		t.Errorf("Inboxes once the database is back: %v", err)
	}
}
