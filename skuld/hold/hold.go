// Package hold dispatches held messages (scheduled, and queued when
// throttled) with River, the job queue, on the store's own database: on
// PostgreSQL through River's database/sql driver, on SQLite through its
// SQLite driver, so that a job is always written in the same *sql.Tx as
// the message it dispatches (River's pgx driver takes a pgx.Tx, which the
// store's gorm transactions are not).
//
// Two kinds of job:
//
//   - due (one per scheduled message): runs at the message's time and
//     dispatches it (skuld.Sender.DispatchDue) if it is still scheduled for
//     that time; a canceled or rescheduled message makes it a no-op.
//   - lane (at most one per inbox, unique by inbox): dispatches the inbox's
//     queued messages one at a time in the order they became due
//     (skuld.Sender.DispatchLane). A lane whose windows are full snoozes
//     until the throttle's Retry-After; when it sends one, the same
//     transaction that records the outcome completes it and enqueues the
//     lane's next job, which River runs behind the other inboxes' jobs. So
//     one inbox with thousands queued holds one job, not thousands, and
//     cannot starve another inbox's mail.
//
// A periodic sweep (on River's leader) makes sure every inbox with queued
// mail has a lane job, whatever a crash or a race left behind.
package hold

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Job kinds, as stored in river_job.kind: never change them.
const (
	kindDue   = "nornweave_due"
	kindLane  = "nornweave_lane"
	kindSweep = "nornweave_sweep"
)

// maxAttempts bounds River's retries of a job that fails (a provider
// failing temporarily): with River's backoff (attempt⁴ seconds), the last
// attempt comes after config.MaxQueueMaxAge, the longest QUEUE_MAX_AGE, so
// a message is failed, expired, by an attempt before River gives its job
// up (TestRetriesOutlastMaxQueueMaxAge).
const maxAttempts = 25

type dueArgs struct {
	MessageID string    `json:"message_id"`
	Due       time.Time `json:"due"`
}

func (dueArgs) Kind() string { return kindDue }

type laneArgs struct {
	InboxID string `json:"inbox_id"`
}

func (laneArgs) Kind() string { return kindLane }

// laneUnique keeps one lane job per inbox among those not finished.
var laneUnique = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}}

type sweepArgs struct{}

func (sweepArgs) Kind() string { return kindSweep }

// Store is what the queue reads itself: the lanes that need a job.
type Store interface {
	QueuedInboxes(ctx context.Context) ([]string, error)
}

// Options configures a Queue.
type Options struct {
	// DB is the store's database, Driver "postgres" or "sqlite".
	DB     *sql.DB
	Driver string
	Store  Store
	Logger *slog.Logger
	// Workers is how many held messages are dispatched at once (default
	// 100: a burst of scheduled mail dispatches at about 0.9 of the direct
	// send rate; 0.34 with 20 in section 13 of BENCHMARKS.md).
	Workers int
	// PollInterval is how often a server looks for jobs that have become
	// due; a scheduled send goes out within about this of its time
	// (default 50 ms: an indexed query, twenty a second when idle).
	PollInterval time.Duration
	// RescueAfter is how long a job may run before River takes it for one
	// abandoned by a server that died, and runs it again (default 1 h).
	// It must exceed the longest send.
	RescueAfter time.Duration
	// SweepInterval is how often every queued inbox is made sure of a
	// lane job (default 15 s).
	SweepInterval time.Duration
	// Alone says no other server uses the database: jobs left running
	// at start-up are this server's from before a crash and are run again
	// at once, instead of after RescueAfter.
	Alone bool
}

// Queue is the River client that dispatches held messages. It implements
// skuld.Jobs. Start it with the Sender once both exist; Stop is safe to
// call more than once.
type Queue struct {
	o      Options
	client *river.Client[*sql.Tx]
	sender *skuld.Sender
	logger *slog.Logger

	// retries holds, by job id, the time of a failed attempt's retry
	// until River asks NextRetry for it (it does not for a job it
	// discards, after maxAttempts: that entry stays, a few bytes).
	retries sync.Map

	mu      sync.Mutex
	started bool
	stopped bool
}

// defaultPoll is Options.PollInterval's default.
const defaultPoll = 50 * time.Millisecond

// fetchCooldown is the least time between two of River's fetches. A fetch
// takes at most Workers jobs, so the cooldown caps a burst at Workers per
// cooldown: River's 100 ms, or our former 50 (2,000 a second), is under
// what this machine sends directly (BENCHMARKS.md, section 16).
const fetchCooldown = 10 * time.Millisecond

// New builds a Queue on o.DB, which River's migrations (Schema) must have
// prepared.
func New(o Options) (*Queue, error) {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	q := &Queue{o: o, logger: o.Logger}
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(q.workDue))
	river.AddWorker(workers, river.WorkFunc(q.workLane))
	river.AddWorker(workers, river.WorkFunc(q.workSweep))
	sweepEvery := cmp.Or(o.SweepInterval, 15*time.Second)
	cfg := &river.Config{
		Logger:               o.Logger.With(slog.String("component", "river")),
		Queues:               map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cmp.Or(o.Workers, 100)}},
		Workers:              workers,
		FetchPollInterval:    cmp.Or(o.PollInterval, defaultPoll),
		FetchCooldown:        min(cmp.Or(o.PollInterval, defaultPoll), fetchCooldown),
		JobTimeout:           -1, // a send bounds itself (its lease) and must not be cut off
		MaxAttempts:          maxAttempts,
		RetryPolicy:          q,
		RescueStuckJobsAfter: cmp.Or(o.RescueAfter, time.Hour),
		PollOnly:             true,
		PeriodicJobs: []*river.PeriodicJob{river.NewPeriodicJob(river.PeriodicInterval(sweepEvery),
			func() (river.JobArgs, *river.InsertOpts) { return sweepArgs{}, nil }, &river.PeriodicJobOpts{RunOnStart: true})},
	}
	var err error
	q.client, err = river.NewClient(driverOf(o.DB, o.Driver), cfg)
	if err != nil {
		return nil, fmt.Errorf("hold: river client: %w", err)
	}
	return q, nil
}

func driverOf(db *sql.DB, driver string) riverdriver.Driver[*sql.Tx] {
	if driver == store.DriverSQLite {
		return riversqlite.New(db)
	}
	return riverdatabasesql.New(db)
}

// Start begins dispatching with s, whose Options.Hold names q.
func (q *Queue) Start(ctx context.Context, s *skuld.Sender) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopped {
		return errors.New("hold: queue started twice, or after Stop")
	}
	q.sender = s
	if q.o.Alone {
		if err := q.rescueOwn(ctx); err != nil {
			return err
		}
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("hold: start river: %w", err)
	}
	q.started = true
	return nil
}

// rescueOwn makes the jobs a crashed run of this server left "running"
// available again, and drops the leadership it left. Each reads its message's own record first: one found
// "sending" had its outcome cut off, and is never sent again.
func (q *Queue) rescueOwn(ctx context.Context) error {
	res, err := q.o.DB.ExecContext(ctx, `UPDATE river_job SET state = 'available'
		WHERE state = 'running' AND kind IN ('`+kindDue+`', '`+kindLane+`')`)
	if err != nil {
		return fmt.Errorf("hold: rescue interrupted jobs: %w", err)
	}
	if n, _ := res.RowsAffected(); n > 0 {
		q.logger.Warn("held-message jobs interrupted by the last shutdown run again", slog.Int64("jobs", n))
	}
	// A crashed run left its leadership in River's table until it expires
	// (River's elect interval and padding, up to 15 s), and only a leader
	// makes scheduled jobs available: a message due in that time went out
	// that late. Alone, the lease can only be this server's own.
	if _, err := q.o.DB.ExecContext(ctx, `DELETE FROM river_leader`); err != nil {
		return fmt.Errorf("hold: drop the last run's leadership: %w", err)
	}
	return nil
}

// Stop stops taking jobs and waits for those running to finish (their
// sends recorded), or for ctx to end. Jobs not started stay in the
// database for the next start.
func (q *Queue) Stop(ctx context.Context) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.started || q.stopped {
		q.stopped = true
		return nil
	}
	q.stopped = true
	if err := q.client.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("hold: stop river: %w", err)
	}
	return nil
}

// Due implements skuld.Jobs.
func (q *Queue) Due(id string, at time.Time) store.JobTx {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := q.client.InsertTx(ctx, tx, dueArgs{MessageID: id, Due: at}, &river.InsertOpts{ScheduledAt: future(at)})
		return wrap(err, "insert due job")
	}
}

// Lane implements skuld.Jobs.
func (q *Queue) Lane(inboxID string, at time.Time) store.JobTx {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := q.client.InsertTx(ctx, tx, laneArgs{InboxID: inboxID},
			&river.InsertOpts{ScheduledAt: future(at), UniqueOpts: laneUnique})
		return wrap(err, "insert lane job")
	}
}

// future is the time to insert a job due at at with: zero when it is due
// within schedulerInterval. A job inserted with a time is "scheduled", and
// River's scheduler (every schedulerInterval, on the leader) makes it
// available before its time, looking that far ahead; one inserted due
// sooner could wait up to an interval. Inserted without a time it runs at
// once, finds itself early and snoozes until its time, which River makes
// available at once for a snooze that short: either way it runs within
// about PollInterval of its time.
func future(at time.Time) time.Time {
	if time.Until(at) > schedulerInterval {
		return at
	}
	return time.Time{}
}

// schedulerInterval is River's JobSchedulerIntervalDefault, which its
// Config does not expose.
const schedulerInterval = 5 * time.Second

func wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("hold: %s: %w", what, err)
}

// completeTx completes job inside tx, as River's JobCompleteTx does (the
// state completed, finalized now, if it is still running), but in a
// statement of its own. JobCompleteTx runs River's general state-change
// statement, written for batches of any change: on PostgreSQL planning it
// cost the database 0.7 ms of CPU per message, about half of what the rest
// of a scheduled dispatch cost it, and on SQLite parsing it was a fifth of
// the server's CPU (BENCHMARKS.md, section 13). The columns are River's
// schema, which its migrations own; TestCompleteTxAsRiver reads the row
// back through River on both databases. River's completer, when the job
// returns, finds it completed and leaves it. On PostgreSQL the same UPDATE
// is also given as SQL, which FinishHeld makes a CTE of the outcome's own
// statement: one round trip for the two, where the transaction took four
// (BENCHMARKS.md, section 16).
func (q *Queue) completeTx(id int64) store.Completion {
	c := store.Completion{Tx: func(ctx context.Context, tx *sql.Tx) error {
		now := time.Now()
		var res sql.Result
		var err error
		if q.o.Driver == store.DriverSQLite {
			res, err = tx.ExecContext(ctx, `UPDATE river_job SET state = 'completed', finalized_at = ?
				WHERE id = ? AND state = 'running'`, sqliteTime(now), id)
		} else {
			res, err = tx.ExecContext(ctx, `UPDATE river_job SET state = 'completed', finalized_at = $1
				WHERE id = $2 AND state = 'running'`, now, id)
		}
		if err != nil {
			return wrap(err, "complete job")
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			return wrap(cmp.Or(err, rivertype.ErrNotFound), fmt.Sprintf("complete job %d (not running)", id))
		}
		return nil
	}}
	if q.o.Driver == store.DriverPostgres {
		// The same UPDATE, which the outcome's statement runs as a CTE.
		c.SQL = &store.JobSQL{SQL: `UPDATE river_job SET state = 'completed', finalized_at = CAST(? AS timestamptz)
			WHERE id = ? AND state = 'running' RETURNING id`,
			Args: func() []any { return []any{time.Now(), id} }, What: fmt.Sprintf("complete job %d (not running)", id)}
	}
	return c
}

// NextRetry implements river.ClientRetryPolicy: River's default backoff
// (attempt⁴ seconds, ±10%), but for an attempt that put its message back
// to be retried, exactly the time that attempt wrote as the message's next
// attempt (retries), so that what a client reads is when River runs it.
func (q *Queue) NextRetry(job *rivertype.JobRow) time.Time {
	if at, ok := q.retries.LoadAndDelete(job.ID); ok {
		return at.(time.Time)
	}
	return time.Now().Add(backoff(job))
}

// retryAt is the function a dispatch calls when its attempt fails: the
// time of the next, remembered for NextRetry, which River asks as soon as
// the job returns.
func (q *Queue) retryAt(job *rivertype.JobRow) func() time.Time {
	return func() time.Time {
		at := time.Now().Add(backoff(job))
		q.retries.Store(job.ID, at)
		return at
	}
}

// backoff is River's default retry delay for job's current attempt:
// attempt⁴ seconds, with a jitter of ±10% drawn from the job's id rather
// than at random. River asks before it records the attempt's error:
// job.Errors holds the earlier attempts' only.
func backoff(job *rivertype.JobRow) time.Duration {
	k := float64(len(job.Errors) + 1)
	jitter := float64(job.ID%21-10) / 100
	return time.Duration(k * k * k * k * (1 + jitter) * float64(time.Second))
}

// sqliteTime is t as River's SQLite driver stores times: text that SQLite's
// date functions compare correctly only in exactly this form.
func sqliteTime(t time.Time) string {
	return t.UTC().Round(time.Millisecond).Format("2006-01-02 15:04:05.000")
}

// workDue dispatches a scheduled message. On PostgreSQL its job is
// completed in the transaction that records the message's fate. On SQLite
// River completes it when workDue returns: River's SQLite driver completes
// jobs one statement each, and one it finds completed already costs it a
// second statement to read the job back; with both, completion was a third
// of the server's CPU in a burst, and a scheduled burst dispatched at 0.55
// of the direct send rate instead of 0.8 (BENCHMARKS.md, section 13). A
// crash between the two leaves the job running; it runs again at start-up
// (rescueOwn), finds its message no longer scheduled, and does nothing.
func (q *Queue) workDue(ctx context.Context, job *river.Job[dueArgs]) error {
	complete := q.completeTx(job.ID)
	if q.o.Driver == store.DriverSQLite {
		complete = store.NoCompletion
	}
	step, err := q.sender.DispatchDue(ctx, job.Args.MessageID, job.Args.Due, complete, q.retryAt(job.JobRow))
	return result(step, err)
}

func (q *Queue) workLane(ctx context.Context, job *river.Job[laneArgs]) error {
	inbox := job.Args.InboxID
	complete := store.Completion{Tx: func(ctx context.Context, tx *sql.Tx) error {
		if err := q.completeTx(job.ID).Tx(ctx, tx); err != nil {
			return err
		}
		return q.Lane(inbox, time.Now())(ctx, tx)
	}}
	step, err := q.sender.DispatchLane(ctx, inbox, complete, q.retryAt(job.JobRow))
	return result(step, err)
}

// workSweep gives every inbox with queued mail a lane job (a duplicate is
// skipped by the lane's uniqueness).
func (q *Queue) workSweep(ctx context.Context, _ *river.Job[sweepArgs]) error {
	inboxes, err := q.o.Store.QueuedInboxes(ctx)
	if err != nil || len(inboxes) == 0 {
		return err
	}
	params := make([]river.InsertManyParams, len(inboxes))
	for i, id := range inboxes {
		params[i] = river.InsertManyParams{Args: laneArgs{InboxID: id}, InsertOpts: &river.InsertOpts{UniqueOpts: laneUnique}}
	}
	_, err = q.client.InsertMany(ctx, params)
	return wrap(err, "sweep lanes")
}

// result maps a dispatch's Step to what River does with the job.
func result(step skuld.Step, err error) error {
	switch {
	case err != nil:
		return err
	case step.Retry != nil:
		return step.Retry
	case step.Snooze > 0:
		return river.JobSnooze(step.Snooze)
	}
	return nil
}

// Schema is River's tables as a part of the store's database: migrated
// by River's own migrator, after the app's migrations, by the same
// command (store.Options.Schemas).
func Schema(driver string) store.Schema {
	migrator := func(db *sql.DB) (*rivermigrate.Migrator[*sql.Tx], error) {
		return rivermigrate.New(driverOf(db, driver), &rivermigrate.Config{Logger: slog.New(slog.DiscardHandler)})
	}
	return store.Schema{
		Name: "river",
		Migrate: func(ctx context.Context, db *sql.DB) error {
			m, err := migrator(db)
			if err != nil {
				return err
			}
			if driver == store.DriverPostgres {
				// Servers starting together take turns, as for the app's
				// migrations. River applies each version in a transaction
				// of its own (one that adds an enum value cannot share it
				// with one that uses it), so the lock is a session's, held
				// on a connection of its own while the pool migrates.
				conn, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer conn.Close()
				if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", riverMigrateLock); err != nil {
					return err
				}
				defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", riverMigrateLock) //nolint:errcheck // closing the session unlocks too
			}
			_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
			return err
		},
		Current: func(ctx context.Context, db *sql.DB) (bool, error) {
			m, err := migrator(db)
			if err != nil {
				return false, err
			}
			existing, err := m.ExistingVersions(ctx)
			if err != nil {
				// No river_migration table yet: not current.
				return false, nil //nolint:nilerr // an empty database is simply not migrated
			}
			all := m.AllVersions()
			return len(existing) > 0 && existing[len(existing)-1].Version == all[len(all)-1].Version, nil
		},
	}
}

// riverMigrateLock serializes River's migrations among servers starting
// at once; arbitrary, but it must never change.
const riverMigrateLock int64 = 0x6e6f726e72697672 // "nornrivr"

// River's timings that the rescue of a dead server's jobs waits on, which
// its Config does not expose (River v0.51.1; TestRiverAgrees checks the
// behaviour they stand for).
const (
	// riverRescueInterval is how often River's leader looks for jobs
	// running longer than their timeout (JobRescuerIntervalDefault).
	riverRescueInterval = 30 * time.Second
	// riverLeaderGap is how long a killed leader's leadership outlives it:
	// its TTL (the elect interval, 5 s, and 10 s of padding), and the next
	// bid of another server (every 5–6 s).
	riverLeaderGap = 21 * time.Second
)

// jobGrace is what a job's timeout allows past the longest send it can
// start: reading the message, the throttle, recording the outcome.
const jobGrace = 30 * time.Second

// JobTimeout is how long a held message's job may run before River takes
// it for one abandoned by a dead server: a lane's batch may start sends
// for skuld.LaneRun, and each of them ends by the end of its lease, at
// most longestLease. The send bounds itself by its lease, so the timeout
// never cuts one off.
func JobTimeout(longestLease time.Duration) time.Duration {
	return skuld.LaneRun + longestLease + jobGrace
}

// RescueBound is the longest a held message whose job a dead server held
// waits before a live server (or the same one restarted) dispatches it:
// the job's timeout, River's rescuer's interval, the dead leader's
// leadership when it was the leader, and River's scheduler, which makes
// the rescued job available.
func RescueBound(longestLease time.Duration) time.Duration {
	return JobTimeout(longestLease) + riverRescueInterval + riverLeaderGap + schedulerInterval
}
