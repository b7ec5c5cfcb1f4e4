package hold

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/testdb"
	"github.com/nornweave/nornweave/store"
)

// completeTx writes what River's JobCompleteTx would: River reads the job
// back completed, finalized now, and its cleaner's comparison of
// finalized_at (text on SQLite) places it correctly in time. A job that is
// not running is not completed. The same on PostgreSQL for the UPDATE as a
// CTE of a held message's outcome (FinishHeld).
func TestCompleteTxAsRiver(t *testing.T) {
	for _, driver := range []string{store.DriverSQLite, store.DriverPostgres} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			dsn := testdb.SQLitePath(t)
			if driver == store.DriverPostgres {
				dsn = testdb.PostgresURL(t)
			}
			st, err := store.Open(ctx, store.Options{Driver: driver, DSN: dsn, Schemas: []store.Schema{Schema(driver)}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			if err := st.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			q, err := New(Options{DB: st.SQL(), Driver: driver, Store: st})
			if err != nil {
				t.Fatal(err)
			}
			forms := map[string]func(id int64) error{"in a transaction": func(id int64) error {
				tx, err := st.SQL().BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback() //nolint:errcheck // after Commit: nothing to do
				if err := q.completeTx(id).Tx(ctx, tx); err != nil {
					return err
				}
				return tx.Commit()
			}}
			if driver == store.DriverPostgres {
				forms["in the outcome's statement"] = func(id int64) error {
					c := q.completeTx(id)
					if c.SQL == nil {
						t.Fatal("no SQL form on PostgreSQL")
					}
					return st.FinishHeld(ctx, "no-such-message", store.Outcome{Status: store.StatusSent}, c)
				}
			}
			for name, complete := range forms {
				ins, err := q.client.Insert(ctx, dueArgs{MessageID: "m1", Due: time.Now()}, nil)
				if err != nil {
					t.Fatal(err)
				}
				id := ins.Job.ID
				// As River's fetch leaves a job it runs.
				if _, err := st.SQL().ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1 WHERE id = `+strconv.FormatInt(id, 10)); err != nil {
					t.Fatal(err)
				}
				before := time.Now()
				if err := complete(id); err != nil {
					t.Fatalf("%s: completeTx: %v", name, err)
				}
				job, err := q.client.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if job.State != rivertype.JobStateCompleted || job.FinalizedAt == nil ||
					job.FinalizedAt.Before(before.Add(-time.Second)) || job.FinalizedAt.After(time.Now().Add(time.Second)) {
					t.Fatalf("%s: River reads the job as %s, finalized %v; want completed, finalized about %v", name, job.State, job.FinalizedAt, before)
				}
				// The horizon is the database's own clock, formatted by the
				// database (on SQLite as River's timeString writes times), not
				// by the code under test.
				for _, c := range []struct {
					offset string
					want   int
				}{{"+1 minute", 1}, {"-1 minute", 0}} {
					query := `SELECT count(*) FROM river_job WHERE state = 'completed' AND finalized_at < now() + $1::interval`
					if driver == store.DriverSQLite {
						query = `SELECT count(*) FROM river_job WHERE state = 'completed'
							AND finalized_at < strftime('%Y-%m-%d %H:%M:%f', 'now', ?)`
					}
					var n int
					if err := st.SQL().QueryRowContext(ctx, query+" AND id = "+strconv.FormatInt(id, 10), c.offset).Scan(&n); err != nil {
						t.Fatal(err)
					}
					if n != c.want {
						t.Errorf("%s: finalized before now %s: %d jobs, want %d", name, c.offset, n, c.want)
					}
				}
				if err := complete(id); err == nil {
					t.Errorf("%s: completeTx of a completed job succeeded, want an error", name)
				}
			}
		})
	}
}

// The last retry of a held message's job comes after the longest
// QUEUE_MAX_AGE, so the message expires (failed by that attempt) before
// River discards the job and leaves it held with nothing to send it. The
// delays are the Queue's retry policy (backoff) at its shortest jitter.
func TestRetriesOutlastMaxQueueMaxAge(t *testing.T) {
	job := &rivertype.JobRow{ID: 21 * 1000} // ID%21 == 0: a jitter of -10%, the earliest
	var earliest time.Duration
	for range maxAttempts - 1 { // the delays before attempts 2..maxAttempts
		earliest += backoff(job)
		job.Errors = append(job.Errors, rivertype.AttemptError{})
	}
	if earliest <= config.MaxQueueMaxAge {
		t.Fatalf("the last of %d attempts comes as early as %v after the first, not after QUEUE_MAX_AGE's bound %v",
			maxAttempts, earliest, config.MaxQueueMaxAge)
	}
	t.Logf("the last attempt comes at least %.1f days after the first; QUEUE_MAX_AGE is at most %v",
		earliest.Hours()/24, config.MaxQueueMaxAge)
}
