package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	// Register the "sqlite" and "pgx" database/sql drivers.
	_ "github.com/glebarez/go-sqlite"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// forEachDialect runs f against a fresh, empty database of each dialect,
// in parallel.
// open returns another connection pool to the same database, to play a
// second server.
func forEachDialect(t *testing.T, f func(t *testing.T, dialect string, open func() *sql.DB)) {
	t.Helper()
	for _, dialect := range []string{Postgres, SQLite} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			var driver, dsn string
			switch dialect {
			case Postgres:
				driver, dsn = "pgx", testdb.PostgresURL(t)
			case SQLite:
				driver = "sqlite"
				dsn = "file:" + testdb.SQLitePath(t) + "?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_txlock=immediate"
			}
			open := func() *sql.DB {
				db, err := sql.Open(driver, dsn)
				if err != nil {
					t.Fatalf("open %s: %v", dialect, err)
				}
				t.Cleanup(func() { _ = db.Close() })
				return db
			}
			f(t, dialect, open)
		})
	}
}

func TestApplyFromEmptyThenNoOp(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, dialect string, open func() *sql.DB) {
		ctx := context.Background()
		db := open()
		ms, err := load(dialect)
		if err != nil {
			t.Fatalf("load: %v", err)
		}
		latest := ms[len(ms)-1].version

		current, gotLatest, err := Status(ctx, db, dialect)
		if err != nil || current != 0 || gotLatest != latest {
			t.Fatalf("Status on empty database = (%d, %d, %v), want (0, %d, nil)", current, gotLatest, err, latest)
		}

		var names []string
		for _, m := range ms {
			names = append(names, m.name)
		}
		for i := range 2 {
			applied, err := ApplyListed(ctx, db, dialect)
			if err != nil {
				t.Fatalf("Apply #%d: %v", i+1, err)
			}
			// The first call applies every file, the second none.
			if want := names[:len(names)*(1-i)]; !slices.Equal(applied, want) {
				t.Errorf("Apply #%d applied %q, want %q", i+1, applied, want)
			}
			current, gotLatest, err = Status(ctx, db, dialect)
			if err != nil || current != latest || gotLatest != latest {
				t.Fatalf("Status after Apply #%d = (%d, %d, %v), want (%d, %d, nil)", i+1, current, gotLatest, err, latest, latest)
			}
			if got := count(t, db, "SELECT COUNT(*) FROM schema_migrations"); got != len(ms) {
				t.Errorf("after Apply #%d got %d schema_migrations rows, want %d", i+1, got, len(ms))
			}
		}

		for _, table := range []string{"inboxes", "threads", "messages", "attachments"} {
			if got := count(t, db, "SELECT COUNT(*) FROM "+table); got != 0 {
				t.Errorf("got %d rows in %s, want 0", got, table)
			}
		}
	})
}

func TestApplyRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, dialect string, open func() *sql.DB) {
		ctx := context.Background()
		db := open()
		if err := Apply(ctx, db, dialect); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		_, latest, _ := Status(ctx, db, dialect)
		if _, err := db.ExecContext(ctx, fmt.Sprintf("INSERT INTO schema_migrations (version) VALUES (%d)", latest+1)); err != nil {
			t.Fatalf("insert future version: %v", err)
		}

		if err := Apply(ctx, db, dialect); !errors.Is(err, ErrSchemaTooNew) {
			t.Errorf("got Apply error %v, want ErrSchemaTooNew", err)
		}
		current, _, err := Status(ctx, db, dialect)
		if err != nil || current != latest+1 {
			t.Errorf("got Status (%d, %v), want (%d, nil)", current, err, latest+1)
		}
	})
}

func TestConcurrentAppliersMigrateOnce(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, dialect string, open func() *sql.DB) {
		ctx := context.Background()
		const servers = 4
		dbs := make([]*sql.DB, servers)
		for i := range dbs {
			dbs[i] = open()
		}
		if dialect == SQLite {
			// Several processes may share a SQLite file only once it is in
			// WAL mode: the switch itself takes a lock no busy handler waits
			// for. The server makes the switch before it migrates (store
			// opens and pings first); do the same here.
			if err := dbs[0].PingContext(ctx); err != nil {
				t.Fatal(err)
			}
		}
		errs := make([]error, servers)
		var wg sync.WaitGroup
		for i, db := range dbs {
			wg.Go(func() { errs[i] = Apply(ctx, db, dialect) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("Apply on server %d: %v", i, err)
			}
		}
		ms, _ := load(dialect)
		if got := count(t, dbs[0], "SELECT COUNT(*) FROM schema_migrations"); got != len(ms) {
			t.Errorf("got %d schema_migrations rows, want %d", got, len(ms))
		}
	})
}

func TestFailedMigrationRollsBackAlone(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, dialect string, open func() *sql.DB) {
		ctx := context.Background()
		db := open()
		ms := []migration{
			{version: 1, name: "0001_a.sql", sql: "CREATE TABLE a (id INTEGER PRIMARY KEY)"},
			{version: 2, name: "0002_b.sql", sql: "CREATE TABLE b (id INTEGER PRIMARY KEY); INSERT INTO no_such_table VALUES (1)"},
		}
		if _, err := apply(ctx, db, dialect, ms); err == nil {
			t.Fatal("got nil error from a broken migration, want one")
		}
		if got := count(t, db, "SELECT MAX(version) FROM schema_migrations"); got != 1 {
			t.Errorf("got version %d, want 1 (the good migration kept, the broken one undone)", got)
		}
		if _, err := db.ExecContext(ctx, "SELECT * FROM b"); err == nil {
			t.Error("table b exists, want the failed migration's statements rolled back")
		}
	})
}

func TestLoad(t *testing.T) {
	t.Parallel()
	pg, err := load(Postgres)
	if err != nil {
		t.Fatalf("load postgres: %v", err)
	}
	lite, err := load(SQLite)
	if err != nil {
		t.Fatalf("load sqlite: %v", err)
	}
	versions := func(ms []migration) []int {
		var vs []int
		for _, m := range ms {
			vs = append(vs, m.version)
		}
		return vs
	}
	if got, want := versions(lite), versions(pg); !slices.Equal(got, want) {
		t.Errorf("got sqlite versions %v, want the same as postgres %v", got, want)
	}
	for i, v := range versions(pg) {
		if v != i+1 {
			t.Errorf("got version %d at position %d, want %d: versions must have no gaps", v, i, i+1)
		}
	}
	if _, err := load("mysql"); err == nil {
		t.Error("got nil error for an unknown dialect, want one")
	}
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n sql.NullInt64
	if err := db.QueryRowContext(context.Background(), query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return int(n.Int64)
}
