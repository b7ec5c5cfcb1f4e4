package pgthrottle_test

import (
	"context"
	"database/sql"
	"os"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/pgthrottle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
)

// TestMigrateFromVersion4: a database whose throttle state was written by
// schema version 4 (bucket widths in seconds, the minute and the hour
// only) is brought to the current one in place, as a running deployment
// upgrades: the counted sends stay counted in the minute and the hour,
// the second and the day are filled from them on the safe side, what was
// in flight stays in flight, and applying the schema again changes
// nothing.
func TestMigrateFromVersion4(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	start := time.Now().Truncate(time.Microsecond)
	fakeClock(t, db, start)
	v4, err := os.ReadFile("testdata/schema_v4.sql")
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, string(v4))
	exec(t, db, `CREATE TABLE pgthrottle_version (version INTEGER NOT NULL); INSERT INTO pgthrottle_version VALUES (4);
		INSERT INTO pgthrottle_present VALUES (true)`)
	// In both scopes: 2 sends now (a 1 s bucket and a 1 min one), 3 sent
	// half an hour ago (a 1 min bucket only: the minute forgot them).
	now, ago := start.UnixNano(), start.Add(-30*time.Minute).UnixNano()
	for _, scope := range []string{"", "a"} {
		for _, r := range []struct {
			width, bucket int64
			sends         int
		}{{1, now / 1e9, 2}, {60, now / 60e9, 2}, {60, ago / 60e9, 3}} {
			if _, err := db.Exec(`INSERT INTO pgthrottle_buckets (scope, width, bucket, sends) VALUES ($1, $2, $3, $4)`,
				scope, r.width, r.bucket, r.sends); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := db.Exec(`INSERT INTO pgthrottle_flights (scope, deadline_ns, n) VALUES ('a', $1, 2)`,
		start.Add(time.Hour).UnixNano()); err != nil {
		t.Fatal(err)
	}
	if err := pgthrottle.Migrate(ctx, db); err != nil {
		t.Fatalf("Migrate from version 4: %v", err)
	}
	if ok, err := pgthrottle.Current(ctx, db); err != nil || !ok {
		t.Fatalf("Current after the migration = %v, %v; want true", ok, err)
	}
	rows := func() map[int64]int {
		t.Helper()
		out := map[int64]int{}
		r, err := db.Query(`SELECT width_ms, sum(sends) FROM pgthrottle_buckets GROUP BY width_ms`)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		for r.Next() {
			var w int64
			var n int
			if err := r.Scan(&w, &n); err != nil {
				t.Fatal(err)
			}
			out[w] = n
		}
		return out
	}
	want := map[int64]int{100: 4, 1000: 4, 60000: 10, 900000: 10} // both scopes
	if got := rows(); !equalCounts(got, want) {
		t.Fatalf("sends per width (ms) after the migration: %v, want %v", got, want)
	}
	exec(t, db, pgthrottle.Schema)
	if got := rows(); !equalCounts(got, want) {
		t.Fatalf("sends per width (ms) after the schema applied again: %v, want %v (unchanged)", got, want)
	}

	global := throttle.Limits{PerSecond: 100, PerMinute: 100, PerHour: 100, PerDay: 100}
	inbox := throttle.Limits{PerMinute: 100, PerHour: 100, PerDay: 100}
	th := pgthrottle.New(pool(t, url), shared.Options{Global: global, Inbox: inbox, Clock: clocktest.New(start)})
	t.Cleanup(func() { _ = th.Close(ctx) })
	st, err := th.State(ctx, "a", throttle.Override{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		got            throttle.WindowState
		used, inFlight int
	}{
		{st.Global.PerSecond, 2, 2}, {st.Global.PerMinute, 2, 2}, {st.Global.PerHour, 5, 2}, {st.Global.PerDay, 5, 2},
		{st.Inbox.PerMinute, 2, 2}, {st.Inbox.PerHour, 5, 2}, {st.Inbox.PerDay, 5, 2},
	} {
		if c.got.Used != c.used || c.got.InFlight != c.inFlight {
			t.Errorf("%v after the migration: used %d, in flight %d; want %d, %d",
				c.got.Window, c.got.Used, c.got.InFlight, c.used, c.inFlight)
		}
	}
}

func equalCounts(a, b map[int64]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
