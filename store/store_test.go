package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm/schema"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/migrations"
)

// t0 is the fixed "now" of the tests; nothing here reads the clock.
var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// forEachDriver runs f once on a migrated PostgreSQL database and once on a
// migrated SQLite one, each new and empty, in parallel.
func forEachDriver(t *testing.T, f func(t *testing.T, s *Store)) {
	t.Helper()
	for _, driver := range []string{DriverPostgres, DriverSQLite} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			f(t, migratedStore(t, driver))
		})
	}
}

// openStore opens an empty, unmigrated database of the given driver.
func openStore(t *testing.T, driver string) *Store {
	t.Helper()
	o := Options{Driver: driver, DSN: testdb.SQLitePath(t)}
	if driver == DriverPostgres {
		o.DSN = testdb.PostgresURL(t)
	}
	return openWith(t, o)
}

// migratedStore opens a new database of the given driver with the
// current schema, copied from a template migrated once per test binary
// (a PostgreSQL template is kept between runs; see testdb).
func migratedStore(t *testing.T, driver string) *Store {
	t.Helper()
	return openWith(t, Options{Driver: driver, DSN: migratedDSN(t, driver)})
}

// migratedDSN is the DSN of a new database of the given driver with the
// current schema.
func migratedDSN(t *testing.T, driver string) string {
	t.Helper()
	key := "store_" + testdb.SchemaKey(t)
	migrate := func(ctx context.Context, dsn string) error {
		s, err := Open(ctx, Options{Driver: driver, DSN: dsn, MaxOpenConns: testPoolSize})
		if err != nil {
			return err
		}
		defer s.Close()
		return s.Migrate(ctx)
	}
	if driver == DriverPostgres {
		return testdb.PostgresMigratedURL(t, key, migrate)
	}
	return testdb.SQLiteMigratedPath(t, key, migrate)
}

// testPoolSize is the PostgreSQL pool of a test's Store: four connections
// still race every write the concurrency tests race, and a package of
// tests in parallel stays within its share of the server's connections.
const testPoolSize = 4

// openWith opens a Store with o, closed when the test ends.
func openWith(t *testing.T, o Options) *Store {
	t.Helper()
	if o.MaxOpenConns == 0 {
		o.MaxOpenConns = testPoolSize
	}
	s, err := Open(context.Background(), o)
	if err != nil {
		t.Fatalf("Open(%s): %v", o.Driver, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestOpenRejectsBadOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		o    Options
	}{
		{"unknown driver", Options{Driver: "mysql", DSN: "x"}},
		{"empty sqlite path", Options{Driver: DriverSQLite}},
		{"bad postgres url", Options{Driver: DriverPostgres, DSN: "postgres://%zz"}},
		{"postgres not listening", Options{Driver: DriverPostgres, DSN: "postgres://postgres@127.0.0.1:1/x?sslmode=disable"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Open(context.Background(), tt.o)
			if err == nil {
				_ = s.Close()
				t.Fatal("got nil error, want one")
			}
			if !strings.HasPrefix(err.Error(), "store: ") {
				t.Errorf("got error %q, want a \"store: \" prefix", err)
			}
		})
	}
}

func TestOpenSQLiteCreatesDirectoryAndMemoryWorks(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{
		filepath.Join(t.TempDir(), "a", "b", "what?#%.db"),
		":memory:",
	} {
		t.Run(dsn, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s, err := Open(ctx, Options{Driver: DriverSQLite, DSN: dsn})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				t.Fatalf("Migrate: %v", err)
			}
			in := newInbox("a@example.com")
			if err := s.CreateInbox(ctx, in); err != nil {
				t.Fatalf("CreateInbox: %v", err)
			}
			if _, err := s.Inbox(ctx, in.ID); err != nil {
				t.Errorf("Inbox after CreateInbox: %v", err)
			}
		})
	}
}

func TestReadyNeedsCurrentSchemaAndCloseTwice(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{DriverPostgres, DriverSQLite} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := openStore(t, driver)
			if got := s.Driver(); got != driver {
				t.Errorf("got Driver() %q, want %q", got, driver)
			}
			if err := s.Ready(ctx); err == nil {
				t.Error("got Ready nil on an unmigrated database, want an error")
			}
			for i := range 2 {
				if err := s.Migrate(ctx); err != nil {
					t.Fatalf("Migrate #%d: %v", i+1, err)
				}
			}
			if err := s.Ready(ctx); err != nil {
				t.Errorf("got Ready %v after Migrate, want nil", err)
			}
			for i := range 2 {
				if err := s.Close(); err != nil {
					t.Errorf("Close #%d: %v", i+1, err)
				}
			}
			if err := s.Ready(ctx); err == nil {
				t.Error("got Ready nil after Close, want an error")
			}
		})
	}
}

// TestSchemaMatchesModels checks that the migrations and the gorm models
// agree on every table and column name, in both directions.
func TestSchemaMatchesModels(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		for _, model := range []any{&Inbox{}, &Thread{}, &Message{}, &Attachment{}, &DeliveryEvent{}, &Suppression{}, &ServerKey{},
			&WebhookEndpoint{}, &WebhookEvent{}, &WebhookDelivery{}, &AdminLogout{}} {
			sch, err := schema.Parse(model, &sync.Map{}, s.db.NamingStrategy)
			if err != nil {
				t.Fatalf("parse %T: %v", model, err)
			}
			var want []string
			for _, f := range sch.Fields {
				if f.DBName != "" && f.Creatable {
					want = append(want, f.DBName)
				}
			}
			cols, err := s.db.Migrator().ColumnTypes(sch.Table)
			if err != nil {
				t.Fatalf("columns of %s: %v", sch.Table, err)
			}
			var got []string
			for _, c := range cols {
				got = append(got, c.Name())
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("table %s has columns %v, want the model's %v", sch.Table, got, want)
			}
		}
	})
}

func TestSlowQueriesLoggedWithoutArguments(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := newGormLogger(slog.New(slog.NewTextHandler(&buf, nil)), slowQuery, nil)
	fc := func() (string, int64) { return "SELECT * FROM messages WHERE id = $1", 1 }

	l.Trace(context.Background(), time.Now(), fc, nil)
	l.Trace(context.Background(), time.Now(), fc, errors.New("duplicate key"))
	if buf.Len() != 0 {
		t.Errorf("got log %q for fast statements, want none", buf.String())
	}

	l.Trace(context.Background(), time.Now().Add(-time.Second), fc, nil)
	for _, want := range []string{"level=WARN", `msg="slow query"`, "duration_ms=", "rows=1", "id = $1"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("got log %q, want it to contain %q", buf.String(), want)
		}
	}
	if sql, args := l.ParamsFilter(context.Background(), "x = ?", "secret body"); sql != "x = ?" || args != nil {
		t.Errorf("got ParamsFilter (%q, %v), want the statement alone", sql, args)
	}
}

func newInbox(addr string) *Inbox {
	return &Inbox{EmailAddress: addr, Name: "Inbox " + addr, CreatedAt: t0}
}

func mustCreateInbox(t *testing.T, s *Store, addr string) *Inbox {
	t.Helper()
	in := newInbox(addr)
	if err := s.CreateInbox(context.Background(), in); err != nil {
		t.Fatalf("CreateInbox(%s): %v", addr, err)
	}
	return in
}

// mustSend stores an outbound message at the given time: in a new thread
// when th is nil (returned), else in th.
func mustSend(t *testing.T, s *Store, in *Inbox, th *Thread, at time.Time, edit func(*Message)) (*Message, *Thread) {
	t.Helper()
	m := &Message{
		InboxID:         in.ID,
		Status:          StatusSent,
		MessageIDHeader: "<" + at.Format("150405.000000") + "@example.com>",
		Subject:         "Subject",
		FromAddress:     in.EmailAddress,
		ToAddresses:     StringList{"to@example.org"},
		CreatedAt:       at,
		SentAt:          &at,
	}
	var newThread *Thread
	if th == nil {
		newThread = &Thread{InboxID: in.ID, Subject: m.Subject, ParticipantHash: "h"}
		th = newThread
	} else {
		m.ThreadID = th.ID
	}
	if edit != nil {
		edit(m)
	}
	if err := s.CreateMessage(context.Background(), m, nil, newThread, nil); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	return m, th
}

func countRows(t *testing.T, s *Store, query string, args ...any) int64 {
	t.Helper()
	var n int64
	if err := s.db.Raw(query, args...).Scan(&n).Error; err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// An unwritable SQLite location is reported with the path and the reason,
// not as SQLite's "out of memory (14)". Tests run as root here, so the
// unwritable places are a directory and a path under a regular file.
func TestOpenSQLiteNamesUnwritablePath(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, reason string }{
		{dir, "is a directory"},
		{filepath.Join(file, "nw.db"), "not a directory"},
	} {
		_, err := Open(context.Background(), Options{Driver: DriverSQLite, DSN: tt.path})
		if err == nil || !strings.Contains(err.Error(), tt.path) || !strings.Contains(err.Error(), tt.reason) {
			t.Errorf("Open(%q) = %v, want the path and %q", tt.path, err, tt.reason)
		}
	}
}

// A schema check that fails to answer (a timeout on a busy database) is
// the database unreachable, not a schema to migrate: /ready told an
// operator to run nornweave migrate when SQLite's one connection was busy.
func TestReadySaysUnreachableWhenASchemaCheckFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cause := errors.New("no answer in time")
	s, err := Open(ctx, Options{Driver: DriverSQLite, DSN: testdb.SQLitePath(t), Schemas: []Schema{{
		Name:    "jobs",
		Migrate: func(context.Context, *sql.DB) error { return nil },
		Current: func(context.Context, *sql.DB) (bool, error) { return false, cause },
	}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, err := migrations.ApplyListed(ctx, s.sqlDB, DriverSQLite); err != nil {
		t.Fatal(err)
	}
	err = s.Ready(ctx)
	if !errors.Is(err, cause) || errors.Is(err, ErrSchemaNotCurrent) {
		t.Errorf("Ready = %v, want the check's error and not ErrSchemaNotCurrent", err)
	}
}
