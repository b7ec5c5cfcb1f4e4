// Package store keeps inboxes, threads and messages in PostgreSQL or SQLite
// through gorm. The schema is owned by package migrations, never by gorm.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/nornweave/nornweave/migrations"
)

// ErrNotFound is returned when the row asked for does not exist.
var ErrNotFound = errors.New("store: not found")

// ErrConflict is returned when a write would break a unique constraint, such
// as a second inbox with the same address.
var ErrConflict = errors.New("store: conflict")

// Drivers accepted in Options.Driver.
const (
	DriverPostgres = migrations.Postgres
	DriverSQLite   = migrations.SQLite
)

// defaultMaxOpenConns is the PostgreSQL pool size when Options leaves it 0.
const defaultMaxOpenConns = 20

// Options configures Open.
type Options struct {
	// Driver is "postgres" or "sqlite".
	Driver string
	// DSN is a PostgreSQL URL, or the path of the SQLite file (its parent
	// directory is created if missing; ":memory:" gives a private
	// in-memory database).
	DSN string
	// Logger receives slow-query warnings. Nil discards them.
	Logger *slog.Logger
	// MaxOpenConns is the PostgreSQL pool size; 0 means 20. SQLite always
	// uses one connection.
	MaxOpenConns int
	// Schemas are the parts that keep tables of their own in the same
	// database, migrated by their own code after the app's migrations.
	Schemas []Schema
	// Trace, when set, is told every statement the Store runs through
	// gorm, once it has run, as the slow-query log shows it: for a test
	// that counts what a request costs the database.
	Trace func(ctx context.Context, sql string)
}

// Schema is a part with tables of its own in the store's database (the
// shared throttle's state): Migrate brings them up to date, Current says
// whether they are.
type Schema struct {
	Name    string
	Migrate func(context.Context, *sql.DB) error
	Current func(context.Context, *sql.DB) (bool, error)
}

// Store is the database. It is safe for concurrent use.
type Store struct {
	db     *gorm.DB
	sqlDB  *sql.DB
	driver string

	closeOnce sync.Once
	closeErr  error

	inboxes inboxCache
	logger  *slog.Logger
	shared  atomic.Bool // see ShareDatabase
	schemas []Schema
	path    string // the SQLite file; "" for PostgreSQL or an in-memory database
}

// Open connects to the database described by o and pings it. It does not
// migrate; call Migrate for that.
func Open(ctx context.Context, o Options) (*Store, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var (
		sqlDB     *sql.DB
		dialector gorm.Dialector
		err       error
	)
	switch o.Driver {
	case DriverPostgres:
		sqlDB, err = openPostgres(o)
		dialector = postgres.New(postgres.Config{Conn: sqlDB})
	case DriverSQLite:
		sqlDB, err = openSQLite(o.DSN)
		dialector = sqlite.Dialector{Conn: sqlDB}
	default:
		return nil, fmt.Errorf("store: unknown driver %q (want %q or %q)", o.Driver, DriverPostgres, DriverSQLite)
	}
	if err != nil {
		return nil, err
	}
	if err := sqlDB.PingContext(ctx); err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: connect to %s: %w", o.Driver, err)
	}
	db, err := gorm.Open(dialector, &gorm.Config{
		Logger:  newGormLogger(logger, slowQuery, o.Trace),
		NowFunc: func() time.Time { return utc(time.Now()) },
		// Single statements need no transaction; the writes that span
		// several statements open their own.
		SkipDefaultTransaction: true,
		TranslateError:         true,
	})
	if err != nil {
		_ = sqlDB.Close()
		return nil, fmt.Errorf("store: open gorm: %w", err)
	}
	st := &Store{db: db, sqlDB: sqlDB, driver: o.Driver, schemas: o.Schemas, logger: logger}
	if o.Driver == DriverSQLite && o.DSN != ":memory:" {
		st.path = o.DSN
	}
	return st, nil
}

func openPostgres(o Options) (*sql.DB, error) {
	cfg, err := pgx.ParseConfig(o.DSN)
	if err != nil {
		return nil, fmt.Errorf("store: parse postgres DSN: %w", err)
	}
	// pgx returns timestamptz in the process's local zone; the store
	// promises UTC whatever the server's TZ.
	sqlDB := stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(checkBeforeUse), stdlib.OptionAfterConnect(func(_ context.Context, c *pgx.Conn) error {
		c.TypeMap().RegisterType(&pgtype.Type{
			Name:  "timestamptz",
			OID:   pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC},
		})
		return nil
	}))
	n := o.MaxOpenConns
	if n <= 0 {
		n = defaultMaxOpenConns
	}
	sqlDB.SetMaxOpenConns(n)
	sqlDB.SetMaxIdleConns(n)
	sqlDB.SetConnMaxIdleTime(5 * time.Minute)
	return sqlDB, nil
}

// sqlitePragmas are run on every new connection. foreign_keys is off by
// default in SQLite and the cascades depend on it; WAL lets readers of the
// file from other processes (backups, the sqlite3 shell) proceed during a
// write; _txlock=immediate takes the write lock at BEGIN, so a transaction
// never fails half-way when another process holds the file. busy_timeout
// comes first, as the pragmas run in order: switching to WAL takes a lock,
// and a connection opened while another holds it must wait, not fail with
// SQLITE_BUSY.
const sqlitePragmas = "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)" +
	"&_pragma=synchronous(NORMAL)&_txlock=immediate"

func openSQLite(path string) (*sql.DB, error) {
	if path == "" {
		return nil, errors.New("store: sqlite DSN is empty, want a file path")
	}
	if path != ":memory:" {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("store: sqlite database %s: cannot create its directory: %w", path, err)
		}
		// SQLite reports an unwritable file as "out of memory (14)"; open
		// it ourselves first so the error names the path and the reason.
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o640)
		if err != nil {
			var pe *os.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			return nil, fmt.Errorf("store: sqlite database %s: cannot open for writing: %w", path, err)
		}
		f.Close()
	}
	// The path becomes a file: URI, in which these three characters would
	// start a query, a fragment or an escape.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	sqlDB, err := sql.Open(sqlite.DriverName, "file:"+escaped+sqlitePragmas)
	if err != nil {
		return nil, fmt.Errorf("store: open sqlite: %w", err)
	}
	// SQLite has one writer. One connection queues writers in Go instead of
	// having hundreds of concurrent requests fail with SQLITE_BUSY, and it
	// keeps a ":memory:" database alive for the life of the Store.
	sqlDB.SetMaxOpenConns(1)
	sqlDB.SetConnMaxLifetime(0)
	sqlDB.SetConnMaxIdleTime(0)
	return sqlDB, nil
}

// Close closes the database. It is safe to call more than once; later calls
// return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if err := s.sqlDB.Close(); err != nil {
			s.closeErr = fmt.Errorf("store: close: %w", err)
		}
	})
	return s.closeErr
}

// Migrate brings the schema up to date (see migrations.Apply), then each
// of Options.Schemas.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.MigrateListed(ctx)
	return err
}

// MigrateListed is Migrate, and names the migrations it applied; see
// migrations.ApplyListed.
func (s *Store) MigrateListed(ctx context.Context) ([]string, error) {
	applied, err := migrations.ApplyListed(ctx, s.sqlDB, s.driver)
	if err != nil {
		return applied, fmt.Errorf("store: migrate: %w", err)
	}
	for _, sc := range s.schemas {
		current, err := sc.Current(ctx, s.sqlDB)
		if err == nil && !current {
			if err = sc.Migrate(ctx, s.sqlDB); err == nil {
				applied = append(applied, sc.Name+" schema")
			}
		}
		if err != nil {
			return applied, fmt.Errorf("store: migrate %s: %w", sc.Name, err)
		}
	}
	return applied, nil
}

// PendingMigrations lists the migrations Migrate would apply, without
// applying them (see migrations.Pending), and each of Options.Schemas that
// is not current.
func (s *Store) PendingMigrations(ctx context.Context) ([]string, error) {
	names, err := migrations.Pending(ctx, s.sqlDB, s.driver)
	if err != nil {
		return nil, fmt.Errorf("store: pending migrations: %w", err)
	}
	for _, sc := range s.schemas {
		ok, err := sc.Current(ctx, s.sqlDB)
		if err != nil {
			return nil, fmt.Errorf("store: %s schema: %w", sc.Name, err)
		}
		if !ok {
			names = append(names, sc.Name+" schema")
		}
	}
	return names, nil
}

// ErrSchemaNotCurrent is Ready's answer when the database answers but its
// schema is not the one this binary expects.
var ErrSchemaNotCurrent = errors.New("store: schema is not current")

// Ready reports whether the database answers and its schema is the one this
// binary expects. It backs GET /ready.
func (s *Store) Ready(ctx context.Context) error {
	if err := s.sqlDB.PingContext(ctx); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	current, latest, err := migrations.Status(ctx, s.sqlDB, s.driver)
	if err != nil {
		return fmt.Errorf("store: schema status: %w", err)
	}
	if current != latest {
		return fmt.Errorf("%w: at version %d, want %d", ErrSchemaNotCurrent, current, latest)
	}
	for _, sc := range s.schemas {
		ok, err := sc.Current(ctx, s.sqlDB)
		if err != nil {
			// Not an answer about the schema: /ready says unreachable,
			// not "run nornweave migrate".
			return fmt.Errorf("store: %s schema status: %w", sc.Name, err)
		}
		if !ok {
			return fmt.Errorf("%w: %s schema", ErrSchemaNotCurrent, sc.Name)
		}
	}
	return nil
}

// Driver returns "postgres" or "sqlite".
func (s *Store) Driver() string { return s.driver }

// utc is how every time is written: in UTC, so that SQLite's text
// timestamps sort in time order, and to the microsecond, PostgreSQL's
// precision, so that what is read back equals what was written.
func utc(t time.Time) time.Time {
	return t.UTC().Truncate(time.Microsecond)
}

// newID fills in an id the caller left empty.
func newID(id *string) {
	if *id == "" {
		*id = uuid.NewString()
	}
}

// wrap maps gorm's errors to the store's and adds the "store: " context.
func wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...)
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return fmt.Errorf("%w: %s", ErrNotFound, msg)
	case errors.Is(err, gorm.ErrDuplicatedKey):
		return fmt.Errorf("%w: %s: %w", ErrConflict, msg, err)
	case errors.Is(err, gorm.ErrForeignKeyViolated):
		// The parent row (an inbox or thread) was deleted meanwhile.
		return fmt.Errorf("%w: %s: %w", ErrNotFound, msg, err)
	case lostConnection(err):
		return fmt.Errorf("%w: %s: %w", ErrUnavailable, msg, err)
	}
	return fmt.Errorf("store: %s: %w", msg, err)
}

// SQL is the database handle, for the parts that keep tables of their own
// in it and speak database/sql (River, through Options.Schemas).
func (s *Store) SQL() *sql.DB { return s.sqlDB }
