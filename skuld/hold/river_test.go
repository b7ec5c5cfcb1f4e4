package hold

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivertype"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
	"github.com/nornweave/nornweave/store"
)

// The River behaviour held mail relies on, read back through River's own
// client on both drivers; it fails if a River upgrade stops agreeing:
//
//   - a lane's job is unique while it is waiting or running, and a new one
//     can be written once it is completed;
//   - JobCompleteTx completes a running job in the caller's transaction,
//     and River's own completion after the worker returns leaves it so;
//   - a snooze of at most schedulerInterval leaves the job available (no
//     leader needed), a longer one scheduled; a job inserted with a time
//     further ahead is scheduled, one inserted without is available;
//   - JobRetry makes a scheduled job available at once.
func TestRiverAgrees(t *testing.T) {
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
			inTx := func(f func(tx *sql.Tx) error) {
				t.Helper()
				tx, err := st.SQL().BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback() //nolint:errcheck // after Commit: nothing to do
				if err := f(tx); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			lanes := func() []*rivertype.JobRow {
				t.Helper()
				res, err := q.client.JobList(ctx, river.NewJobListParams().Kinds(kindLane))
				if err != nil {
					t.Fatal(err)
				}
				return res.Jobs
			}
			state := func(id int64) *rivertype.JobRow {
				t.Helper()
				job, err := q.client.JobGet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				return job
			}

			// Unique while waiting: two writes, one job.
			for range 2 {
				inTx(func(tx *sql.Tx) error { return q.Lane("inbox-1", time.Now())(ctx, tx) })
			}
			if jobs := lanes(); len(jobs) != 1 || jobs[0].State != rivertype.JobStateAvailable {
				t.Fatalf("two lane writes: %d jobs, want one available", len(jobs))
			}
			lane := lanes()[0].ID

			// A client of the test's own kinds, on the same tables: River
			// runs the lane job (completing it in a transaction) and the
			// snoozing jobs.
			workers := river.NewWorkers()
			river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[laneArgs]) error {
				if job.ID != lane {
					return nil // the lane's next job: done
				}
				var err error
				inTxErr := func(tx *sql.Tx) error {
					if driver == store.DriverSQLite {
						_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, tx, job)
					} else {
						_, err = river.JobCompleteTx[*riverdatabasesql.Driver](ctx, tx, job)
					}
					if err != nil {
						return err
					}
					// Still running to any other writer of the lane until
					// this commits: unique against a second job.
					return q.Lane("inbox-1", time.Now())(ctx, tx)
				}
				tx, err := st.SQL().BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if err := inTxErr(tx); err != nil {
					tx.Rollback() //nolint:errcheck // the error is the one to report
					return err
				}
				return tx.Commit()
			}))
			river.AddWorker(workers, river.WorkFunc(func(ctx context.Context, job *river.Job[dueArgs]) error {
				if early := time.Until(job.Args.Due); early > 0 {
					return river.JobSnooze(early)
				}
				return nil
			}))
			client, err := river.NewClient(driverOf(st.SQL(), driver), &river.Config{
				Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
				Workers:           workers,
				FetchPollInterval: 50 * time.Millisecond, FetchCooldown: 10 * time.Millisecond, PollOnly: true,
			})
			if err != nil {
				t.Fatal(err)
			}
			short, err := client.Insert(ctx, dueArgs{MessageID: "short", Due: time.Now().Add(schedulerInterval - time.Second)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			long, err := client.Insert(ctx, dueArgs{MessageID: "long", Due: time.Now().Add(schedulerInterval + 20*time.Second)}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if err := client.Start(ctx); err != nil {
				t.Fatal(err)
			}
			defer client.Stop(ctx) //nolint:errcheck // the test is over
			until := func(what string, cond func() bool) {
				t.Helper()
				for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
					if time.Now().After(deadline) {
						t.Fatalf("River never read %s", what)
					}
				}
			}
			until("the lane job completed", func() bool { return state(lane).State == rivertype.JobStateCompleted })
			if jobs := lanes(); len(jobs) != 2 || jobs[1].ID == lane {
				t.Fatalf("after the lane job completed with a write of the lane in its transaction: %d lane jobs, want 2 "+
					"(the write was unique against the running job? then queued mail could be left without one)", len(jobs))
			}
			until("the short snooze", func() bool {
				return state(short.Job.ID).Attempt == 1 && state(short.Job.ID).State != rivertype.JobStateRunning
			})
			if j := state(short.Job.ID); j.State != rivertype.JobStateAvailable && j.State != rivertype.JobStateCompleted {
				t.Errorf("a snooze under schedulerInterval left the job %s, want available (runnable without River's leader)", j.State)
			}
			until("the long snooze", func() bool { return state(long.Job.ID).State == rivertype.JobStateScheduled })
			if j, err := client.JobRetry(ctx, long.Job.ID); err != nil || j.State != rivertype.JobStateAvailable || j.ScheduledAt.After(time.Now()) {
				t.Fatalf("JobRetry of a scheduled job: %v; want it available now", err)
			}

			// Inserted due later than the scheduler looks ahead: scheduled;
			// due sooner (future gives no time): available.
			var far, near *rivertype.JobInsertResult
			inTx(func(tx *sql.Tx) (err error) {
				far, err = q.client.InsertTx(ctx, tx, dueArgs{MessageID: "far"}, &river.InsertOpts{ScheduledAt: future(time.Now().Add(time.Minute))})
				if err != nil {
					return err
				}
				near, err = q.client.InsertTx(ctx, tx, dueArgs{MessageID: "near"}, &river.InsertOpts{ScheduledAt: future(time.Now().Add(time.Second))})
				return err
			})
			if far.Job.State != rivertype.JobStateScheduled || near.Job.State != rivertype.JobStateAvailable {
				t.Errorf("inserted a minute ahead: %s, a second ahead: %s; want scheduled, available", far.Job.State, near.Job.State)
			}
		})
	}
}
