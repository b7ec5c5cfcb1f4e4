package skuld_test

import (
	"context"
	"database/sql"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/migrations"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttletest"
)

// TestPostgresThrottleConformance runs the backend conformance suite on the
// real PostgreSQL, a fresh database per case. Two throttles of one case
// have separate connection pools, like two servers.
func TestPostgresThrottleConformance(t *testing.T) {
	throttletest.Run(t, func(t *testing.T) throttletest.Backend {
		url := testdb.PostgresURL(t)
		migrate(t, url)
		var offset atomic.Int64
		return throttletest.Backend{
			New: func(global, inbox skuld.Limits) skuld.Throttle {
				db := openDB(t, url)
				return skuld.NewPostgresThrottle(db, skuld.PostgresOptions{Global: global, Inbox: inbox,
					ClockOffset: func() time.Duration { return time.Duration(offset.Load()) }})
			},
			Advance: func(d time.Duration) { offset.Add(int64(d)) },
			Margin:  skuld.DefaultLeaseMargin,
			// The trigger of migration 0006 moves the version with the
			// change; a statement that changes no row moves it too.
			ChangeInbox: func() {
				if _, err := openDB(t, url).Exec(`UPDATE inboxes SET name = name WHERE false`); err != nil {
					t.Fatal(err)
				}
			},
			Shared: true,
		}
	})
}

func openDB(t testing.TB, url string) *sql.DB {
	t.Helper()
	db, err := skuld.OpenPostgresThrottleDB(url, 10)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func migrate(t *testing.T, url string) {
	t.Helper()
	if err := migrateDB(openDB(t, url)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
}

func migrateDB(db *sql.DB) error {
	return migrations.Apply(context.Background(), db, migrations.Postgres)
}

// Far from every limit a server gathers its commits and sends them
// together, each counted at the moment it was made; near one (80%) it sends
// them at once, so that another server's refusal does not take them for
// sends still in flight.
func TestPostgresThrottleGathersCommits(t *testing.T) {
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	migrate(t, url)
	var offset atomic.Int64
	newThrottle := func() *skuld.PostgresThrottle {
		return skuld.NewPostgresThrottle(openDB(t, url), skuld.PostgresOptions{
			Global: skuld.Limits{PerMinute: 10}, SettleDelay: time.Hour,
			ClockOffset: func() time.Duration { return time.Duration(offset.Load()) }})
	}
	th, other := newThrottle(), newThrottle()
	used := func(wantUsed, wantInFlight int) {
		t.Helper()
		st, err := other.State(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if st.PerMinute.Used != wantUsed || st.PerMinute.InFlight != wantInFlight {
			t.Fatalf("another server sees used %d, in flight %d; want %d, %d",
				st.PerMinute.Used, st.PerMinute.InFlight, wantUsed, wantInFlight)
		}
	}
	send := func() {
		t.Helper()
		tk, err := th.ReserveInbox(ctx, time.Minute, "", skuld.Override{})
		if err != nil {
			t.Fatal(err)
		}
		if err := tk.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		send()
	}
	used(0, 3) // gathered, not sent
	offset.Add(int64(30 * time.Second))
	if err := th.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	used(3, 0)
	offset.Add(int64(31 * time.Second))
	used(0, 0) // counted when committed, 61 s ago, not when sent

	for range 7 {
		send()
	}
	used(0, 7)
	send() // the eighth of ten: near the limit, sent at once with the rest
	used(8, 0)
}

// A caller that gives up while its admission is in a batch leaves nothing
// behind: a reservation made for it is released.
func TestPostgresThrottleAbandonedAdmissionIsReleased(t *testing.T) {
	ctx := context.Background()
	url := testdb.PostgresURL(t)
	migrate(t, url)
	th := skuld.NewPostgresThrottle(openDB(t, url), skuld.PostgresOptions{Global: skuld.Limits{PerMinute: 1}})
	gone, cancel := context.WithCancel(ctx)
	cancel()
	for {
		tk, err := th.ReserveInbox(gone, time.Minute, "", skuld.Override{})
		if err != nil {
			break // given up before the batch answered
		}
		// The batch answered first: give the slot back, try again.
		if err := tk.Release(ctx); err != nil {
			t.Fatal(err)
		}
		if err := th.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		tk, err := th.ReserveInbox(ctx, time.Minute, "", skuld.Override{})
		if err == nil {
			_ = tk.Release(ctx)
			return
		}
		if !errors.As(err, new(*skuld.RateLimitedError)) || time.Now().After(deadline) {
			t.Fatalf("the abandoned admission's slot never came back: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
