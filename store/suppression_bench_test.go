package store

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// BenchmarkSuppressed measures the lookup every send makes before the
// throttle (issue 29): Suppressed of one address that is not on the list,
// on a store whose list is empty and on one with 100,000 addresses, each
// database, so that what the list's size costs a send shows apart from the
// rest of the send (tests' BenchmarkSuppressionSend). The two alternate in
// NORNWEAVE_BENCH_ROUNDS rounds (default 1), the empty list first in odd
// rounds and last in even ones; the second of a round reports the round's
// overhead-%. Strip go test's #NN suffixes before benchstat.
func BenchmarkSuppressed(b *testing.B) {
	rounds := 1
	if v := os.Getenv("NORNWEAVE_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("NORNWEAVE_BENCH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	cases := []int{0, 100_000}
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		b.Run(driver, func(b *testing.B) {
			stores := make([]*Store, len(cases))
			for i, n := range cases {
				stores[i] = suppressedStore(b, driver, n)
			}
			ctx := context.Background()
			emails := []string{"ann@customer.test"}
			for r := range rounds {
				order := []int{0, 1}
				if r%2 == 1 {
					order = []int{1, 0}
				}
				var per [2]time.Duration
				for k, i := range order {
					b.Run(fmt.Sprintf("rows=%d", cases[i]), func(b *testing.B) {
						b.ReportAllocs()
						for b.Loop() {
							found, err := stores[i].Suppressed(ctx, emails)
							if err != nil || len(found) != 0 {
								b.Fatalf("Suppressed = %v, %v; want none", found, err)
							}
						}
						per[i] = b.Elapsed() / time.Duration(b.N)
						if k == 1 && per[0] > 0 {
							b.ReportMetric((float64(per[1])/float64(per[0])-1)*100, "overhead-%")
						}
					})
				}
			}
		})
	}
}

// suppressedStore opens a fresh, migrated database of driver whose
// suppression list holds n addresses, user<i>@list<i mod 1000>.test, put
// there in one statement.
func suppressedStore(b *testing.B, driver string, n int) *Store {
	ctx := context.Background()
	o := Options{Driver: driver, DSN: testdb.SQLitePath(b)}
	if driver == DriverPostgres {
		o.DSN = testdb.PostgresURL(b)
	}
	s, err := Open(ctx, o)
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	b.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatalf("Migrate: %v", err)
	}
	if n == 0 {
		return s
	}
	q := `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		INSERT INTO suppressions (email, reason, source, created_at)
		SELECT 'user' || i || '@list' || (i % 1000) || '.test', 'bounce', 'sendgrid', ? FROM n`
	if driver == DriverPostgres {
		q = `INSERT INTO suppressions (email, reason, source, created_at)
			SELECT 'user' || i || '@list' || (i % 1000) || '.test', 'bounce', 'sendgrid', $2::timestamptz
			FROM generate_series(1, $1::int) AS i`
	}
	if _, err := s.sqlDB.ExecContext(ctx, q, n, time.Now().UTC()); err != nil {
		b.Fatalf("fill suppressions: %v", err)
	}
	if driver == DriverPostgres {
		// As autovacuum would soon after: the planner knows the table.
		if _, err := s.sqlDB.ExecContext(ctx, "ANALYZE suppressions"); err != nil {
			b.Fatal(err)
		}
	}
	return s
}
