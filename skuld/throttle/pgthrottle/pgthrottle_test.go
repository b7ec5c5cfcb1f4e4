package pgthrottle_test

import (
	"cmp"
	"context"
	"database/sql"
	neturl "net/url"
	"os"
	"strings"
	"testing"
	"time"

	// Registers the "pgx" database/sql driver for Migrate.
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/tcpproxy"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttletest"
)

// TestConformance runs the backend conformance suite on the real
// PostgreSQL, a fresh database per case, on a clock of the test's (see
// fakeClock). Two throttles of one case have separate connection pools,
// like two servers.
func TestConformance(t *testing.T) {
	t.Parallel()
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		url, db := migrated(t)
		exec(t, db, `INSERT INTO pgthrottle_present VALUES (true)`)
		start := time.Now().Truncate(time.Microsecond) // the database's precision
		advanceDB := fakeClock(t, db, start)
		proxy, url := viaProxy(t, url)
		clock := clocktest.New(start)
		return throttletest.Backend{
			New: func(o throttletest.Options) throttle.Throttle {
				th := pgthrottle.New(pool(t, url), shared.Options{Global: o.Global, Inbox: o.Inbox, CallTimeout: throttletest.CallTimeout,
					Clock: clock, SettleDelay: o.Settle(), Rebuild: o.Rebuild})
				t.Cleanup(func() { _ = th.Close(context.Background()) })
				return th
			},
			Advance: func(d time.Duration) { clock.Advance(d); advanceDB(d) },
			Margin:  shared.DefaultLeaseMargin,
			Lose: func() {
				exec(t, db, `DELETE FROM pgthrottle_present; DELETE FROM pgthrottle_buckets; DELETE FROM pgthrottle_flights`)
			},
			Stall:   proxy.Hold,
			Shared:  true,
			Weights: true,
			Spans:   true,
		}
	})
}

// fakeClock makes the clock that stamps the throttle's state, the
// database's clock_timestamp(), read start, moved only by the function it
// returns, in every session opened on db's database from now on.
//
// The schema's functions and Read call clock_timestamp() unqualified, and
// PostgreSQL looks a name up in pg_catalog first unless the search_path
// names pg_catalog later: a function of that name in public, with the
// database's search_path "public, pg_catalog", stands in for PostgreSQL's
// without a line of the schema changed for tests. The database's real
// clock ran on while a case held sends a second from a bucket edge, so
// BucketEdges failed whenever a loaded machine took more than that second
// between its steps (issue 28); on this clock the edges are exact.
func fakeClock(t *testing.T, db *sql.DB, start time.Time) func(d time.Duration) {
	t.Helper()
	var name string
	if err := db.QueryRow(`SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	exec(t, db, `CREATE TABLE test_clock (now TIMESTAMPTZ NOT NULL);
		CREATE FUNCTION public.clock_timestamp() RETURNS TIMESTAMPTZ LANGUAGE sql STABLE AS 'SELECT now FROM test_clock';
		ALTER DATABASE "`+name+`" SET search_path = public, pg_catalog`)
	if _, err := db.Exec(`INSERT INTO test_clock VALUES ($1)`, start); err != nil {
		t.Fatal(err)
	}
	return func(d time.Duration) {
		t.Helper()
		if _, err := db.Exec(`UPDATE test_clock SET now = now + $1 * interval '1 microsecond'`, d.Microseconds()); err != nil {
			t.Fatal(err)
		}
	}
}

// viaProxy returns a proxy in front of the server of url, and url through
// it.
func viaProxy(t *testing.T, raw string) (*tcpproxy.Proxy, string) {
	t.Helper()
	u, err := neturl.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	// A URL may name a unix socket's directory (host=/var/run/postgresql,
	// as under make test's network guard): the proxy dials that socket.
	q := u.Query()
	if dir := q.Get("host"); strings.HasPrefix(dir, "/") {
		target = dir + "/.s.PGSQL." + cmp.Or(u.Port(), "5432")
		q.Del("host")
		u.RawQuery = q.Encode()
	}
	p := tcpproxy.Start(t, target)
	u.Host = p.Addr()
	return p, u.String()
}

// migrated returns a new database with the throttle's schema, cloned from
// a template migrated once.
func migrated(t *testing.T) (string, *sql.DB) {
	t.Helper()
	url := testdb.PostgresMigratedURL(t, "pgthrottle_"+testdb.SchemaKey(t), migrate)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return url, db
}

// migrate applies the throttle's schema to the empty database at url.
func migrate(ctx context.Context, url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	return pgthrottle.Migrate(ctx, db)
}

// pool opens a throttle pool on the database at url, as a server would.
func pool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgthrottle.OpenPool(context.Background(), url, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

func exec(t *testing.T, db *sql.DB, q string) {
	t.Helper()
	if _, err := db.Exec(q); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// BenchmarkReserveCommit: one goroutine; far from every limit the commit
// is gathered, so the pair costs the admission's round trip.
func BenchmarkReserveCommit(b *testing.B) { benchReserveCommit(b, 0) }

// BenchmarkReserveCommitAtOnce sends each commit at once, as near a limit:
// two round trips.
func BenchmarkReserveCommitAtOnce(b *testing.B) { benchReserveCommit(b, -1) }

func benchReserveCommit(b *testing.B, settleDelay time.Duration) {
	url := testdb.PostgresURL(b)
	db, err := sql.Open("pgx", url)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	if err := pgthrottle.Migrate(context.Background(), db); err != nil {
		b.Fatal(err)
	}
	p, err := pgthrottle.OpenPool(context.Background(), url, 4)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	th := pgthrottle.New(p, shared.Options{Global: throttletest.BenchLimits, Inbox: throttletest.BenchLimits,
		SettleDelay: settleDelay})
	defer th.Close(context.Background())
	throttletest.BenchReserveCommit(b, th)
}

// TestMigrateFromVersion2: a database whose throttle state was written by
// schema version 2 (a reservation a row of one send, functions with the
// results of that version) is brought to the current one in place: what
// was in flight stays in flight, as one slot each, and the new functions
// admit and settle blocks.
func TestMigrateFromVersion2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	v2, err := os.ReadFile("testdata/schema_v2.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, string(v2))
	exec(t, db, `CREATE TABLE pgthrottle_version (version INTEGER NOT NULL); INSERT INTO pgthrottle_version VALUES (2);
		INSERT INTO pgthrottle_present VALUES (true)`)
	far := time.Now().Add(time.Hour).UnixNano()
	if _, err := db.Exec(`INSERT INTO pgthrottle_flights (scope, deadline_ns) VALUES ('a', $1)`, far); err != nil {
		t.Fatal(err)
	}
	if err := pgthrottle.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate from version 2: %v", err)
	}
	if ok, err := pgthrottle.Current(ctx, db); err != nil || !ok {
		t.Fatalf("Current after the migration = %v, %v; want true", ok, err)
	}
	lim := throttle.Limits{PerMinute: 1000}
	th := pgthrottle.New(pool(t, url), shared.Options{Global: lim, Inbox: lim})
	t.Cleanup(func() { _ = th.Close(ctx) })
	st, err := th.State(ctx, "a", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	if in := st.Inbox.PerMinute; in.InFlight != 1 || in.Used != 0 {
		t.Fatalf("inbox a after the migration: %+v, want its reservation of version 2 in flight", in)
	}
	for range 3 { // the second call takes a block of spares with it
		tk, err := th.Reserve(ctx, throttle.Request{Inbox: "a", Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if err := th.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var rows, slots int
	if err := db.QueryRow(`SELECT count(*), coalesce(sum(n), 0) FROM pgthrottle_flights`).Scan(&rows, &slots); err != nil {
		t.Fatal(err)
	}
	if rows != 1 || slots != 1 {
		t.Fatalf("after three sends and a stop: %d reservations holding %d slots, want only version 2's (1, 1)", rows, slots)
	}
}
