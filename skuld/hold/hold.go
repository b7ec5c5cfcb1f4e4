// Package hold dispatches held messages (scheduled, and queued when
// throttled; package skuld accepts them and writes their jobs through
// Queue's Due and Lane) with River, the job queue, on the store's own
// database: on PostgreSQL through River's database/sql driver, on SQLite
// through its SQLite driver, so that a job is always written in the same
// *sql.Tx as the message it dispatches (River's pgx driver takes a pgx.Tx,
// which the store's gorm transactions are not).
//
// River owns the jobs and the message's row owns the message: this package
// touches River's tables only through River's client. Two kinds of job:
//
//   - due (one per scheduled message): runs at the message's time and
//     dispatches it (dispatchDue) if it is still scheduled for that time; a
//     canceled or rescheduled message makes it a no-op.
//   - lane (at most one per inbox, unique by inbox): dispatches the inbox's
//     queued messages one at a time in the order they became due
//     (dispatchLane), a batch per run, yielding to the other
//     inboxes' jobs between batches. So one inbox with thousands queued
//     holds one job, not thousands, and cannot starve another inbox's mail.
//     The job is written in the transaction that queues a message, and
//     ends only in a transaction that finds the lane empty, both under the
//     lane's lock (store.ShareLane, EndLane): queued mail always has a job.
//
// Every job has a finite timeout, above the longest send it can start, so
// that River's rescuer runs again the jobs of a server that died; the
// rescued run first recovers the sends that server left in flight.
//
// The send itself is the Sender's (skuld.Sender.AdmitHeld): the domain
// filter, the throttle, the provider and the drain are the same as a
// direct send's. This package decides when a held message goes, claims
// it, and records its outcome.
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
	"github.com/riverqueue/river/rivertype"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/store"
)

// Job kinds, as River stores them: never change them. KindDue, a
// scheduled message's job, is exported for tests that read its jobs
// through River's client.
const (
	KindDue  = "nornweave_due"
	kindLane = "nornweave_lane"
)

// maxAttempts bounds River's retries of a job whose dispatch fails (the
// database, not the provider: a provider failing temporarily puts the
// message back with its next attempt, and the job snoozes until then).
// With River's backoff (attempt⁴ seconds) the last comes after about two
// weeks; a rescue counts as an attempt too.
const maxAttempts = 25

type dueArgs struct {
	MessageID string    `json:"message_id"`
	Due       time.Time `json:"due"`
}

func (dueArgs) Kind() string { return KindDue }

type laneArgs struct {
	InboxID string `json:"inbox_id"`
}

func (laneArgs) Kind() string { return kindLane }

// laneUnique keeps one lane job per inbox among those not finished.
var laneUnique = river.UniqueOpts{ByArgs: true, ByState: []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled,
}}

// Store is what the queue needs of the store: the lane's lock, which a
// lane's job takes before it is written, and what dispatching a held
// message reads and writes.
type Store interface {
	ShareLane(ctx context.Context, tx *sql.Tx, inboxID string) error
	Inbox(ctx context.Context, id string) (*store.Inbox, error)
	DueMessage(ctx context.Context, id string) (m *store.Message, laneBusy bool, err error)
	LaneHead(ctx context.Context, inboxID string) (*store.Message, error)
	Attachments(ctx context.Context, f store.AttachmentFilter) ([]store.Attachment, error)
	AttachmentContent(ctx context.Context, id string) ([]byte, error)
	ClaimHeld(ctx context.Context, m *store.Message, slot *store.SendSlot) error
	QueueHeld(ctx context.Context, m *store.Message, next time.Time, job store.JobTx) (*store.Message, error)
	FailHeld(ctx context.Context, m *store.Message, reason string) (*store.Message, error)
	FinishHeld(ctx context.Context, id string, o store.Outcome) error
	EndLane(ctx context.Context, inboxID string, end store.JobTx) (bool, error)
	SetNextAttempt(ctx context.Context, id string, at time.Time) error
	RecoverSends(ctx context.Context, scope store.RecoverScope, now, before time.Time, lane store.LaneJob) (int64, error)
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
	// LongestLease is the lease of the largest message the server
	// accepts: a job's timeout is JobTimeout of it.
	LongestLease time.Duration
	// Alone says the server holds the database to itself (its server
	// lock): at start it runs early the jobs due within the time a dead
	// run's River leadership may outlive it (see Start).
	Alone bool
	// Clock is the time of dispatch: when a held message is due, how long
	// it has waited, a lane's run. It must be the Sender's (nil: the
	// system clock). River's own timing keeps real time.
	Clock clock.Clock
	// MaxAge is how long after it became due a held message may wait for
	// its windows or a provider that fails temporarily; past it, it fails
	// as expired (QUEUE_MAX_AGE; default 24 h).
	MaxAge time.Duration
	// Observer, if set, is told the lateness of each dispatch.
	Observer Observer
	// RetryPolicy is when River runs again a job whose dispatch failed
	// (the database, not the provider), or one its rescuer took back from
	// a server that died (nil: River's default, attempt⁴ seconds).
	// ScaledRetry shortens River's schedule for a test.
	RetryPolicy river.ClientRetryPolicy
	// Extensions add other packages' kinds of job to the queue's River
	// client (webhooks out): one client per database, so that its leader's
	// scheduler and rescuer serve every kind.
	Extensions []Extension
}

// Extension is a kind of job of another package run by the Queue's River
// client, in a queue of its own so that its jobs never wait behind held
// mail's, nor held mail behind them.
type Extension struct {
	Queue    string
	Workers  int
	Register func(*river.Workers)
	// PollInterval is how often an idle server looks for the queue's jobs
	// (0: the Queue's own PollInterval). River polls each queue apart:
	// a queue is one more query per interval on every idle server.
	PollInterval time.Duration
}

// Queue is the River client that dispatches held messages. It implements
// skuld.Jobs. Start it with the Sender once both exist; Stop is safe to
// call more than once.
type Queue struct {
	o      Options
	client *river.Client[*sql.Tx]
	d      *dispatcher // set by Start, before River runs a job
	logger *slog.Logger

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
	if o.Clock == nil {
		o.Clock = clock.NewSystem()
	}
	if o.MaxAge <= 0 {
		o.MaxAge = 24 * time.Hour
	}
	q := &Queue{o: o, logger: o.Logger}
	timeout := JobTimeout(o.LongestLease)
	workers := river.NewWorkers()
	river.AddWorker(workers, &dueWorker{q: q, timeout: timeout})
	river.AddWorker(workers, &laneWorker{q: q, timeout: timeout})
	queues := map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: cmp.Or(o.Workers, 100)}}
	for _, x := range o.Extensions {
		x.Register(workers)
		queues[x.Queue] = river.QueueConfig{MaxWorkers: x.Workers, FetchPollInterval: x.PollInterval}
	}
	cfg := &river.Config{
		Logger:               slog.New(routine{o.Logger.With(slog.String("component", "river")).Handler()}),
		Queues:               queues,
		Workers:              workers,
		FetchPollInterval:    cmp.Or(o.PollInterval, defaultPoll),
		FetchCooldown:        min(cmp.Or(o.PollInterval, defaultPoll), fetchCooldown),
		JobTimeout:           timeout,
		RescueStuckJobsAfter: timeout,
		MaxAttempts:          maxAttempts,
		RetryPolicy:          o.RetryPolicy,
		PollOnly:             true,
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

// Start begins dispatching with s, whose Options.Hold names q. Alone
// (Options.Alone), it first makes the jobs due within riverLeaderGap
// available at once (River's JobRetry): only River's leader makes a
// scheduled job available, and the leadership of this server's run that
// died (kill -9) outlives it by up to riverLeaderGap; a job made
// available early runs, finds itself early and waits in short snoozes,
// which River keeps available without a leader. Jobs the dead run was
// running wait for River's rescuer (RescueBound).
func (q *Queue) Start(ctx context.Context, s *skuld.Sender) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.started || q.stopped {
		return errors.New("hold: queue started twice, or after Stop")
	}
	q.d = &dispatcher{sender: s, store: q.o.Store, lane: q.Lane, clock: q.o.Clock, logger: q.logger,
		maxAge: q.o.MaxAge, observer: q.o.Observer}
	if q.o.Alone {
		if err := q.runSoon(ctx, time.Now().Add(riverLeaderGap+schedulerInterval)); err != nil {
			return err
		}
	}
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("hold: start river: %w", err)
	}
	q.started = true
	return nil
}

// runSoon makes available the held-message jobs waiting for River's
// scheduler (scheduled, or retryable) that are due before by.
func (q *Queue) runSoon(ctx context.Context, by time.Time) error {
	// Only held mail's: a held job run early waits for its time, and
	// another kind may not (a webhook's retry would come before the
	// Retry-After its endpoint asked for).
	params := river.NewJobListParams().Kinds(KindDue, kindLane).
		States(rivertype.JobStateScheduled, rivertype.JobStateRetryable).
		OrderBy(river.JobListOrderByScheduledAt, river.SortOrderAsc).First(100)
	n := 0
	for {
		page, err := q.client.JobList(ctx, params)
		if err != nil {
			return fmt.Errorf("hold: list jobs due soon: %w", err)
		}
		for _, job := range page.Jobs {
			if job.ScheduledAt.After(by) {
				page.Jobs = nil
				break
			}
			if _, err := q.client.JobRetry(ctx, job.ID); err != nil {
				return fmt.Errorf("hold: run job %d early: %w", job.ID, err)
			}
			n++
		}
		if len(page.Jobs) < 100 {
			break
		}
		params = params.After(page.LastCursor)
	}
	if n > 0 {
		q.logger.Info("held-message jobs due soon made available at start-up", slog.Int("jobs", n))
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

// Ready reports whether the queue dispatches held mail: an error once
// River's client has stopped (by Stop, or on its own).
func (q *Queue) Ready() error {
	select {
	case <-q.client.Stopped():
		return errors.New("hold: the job queue (River) is stopped; held mail is not dispatched")
	default:
		return nil
	}
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
		if err := q.o.Store.ShareLane(ctx, tx, inboxID); err != nil {
			return err
		}
		// InsertManyFastTx: a lane job that exists is left as it is with ON
		// CONFLICT DO NOTHING, where InsertTx's DO UPDATE locks its row
		// until commit, one queuer of the inbox after another.
		_, err := q.client.InsertManyFastTx(ctx, tx, []river.InsertManyParams{{Args: laneArgs{InboxID: inboxID},
			InsertOpts: &river.InsertOpts{ScheduledAt: future(at), UniqueOpts: laneUnique}}})
		return wrap(err, "insert lane job")
	}
}

// InsertTx writes jobs of the Queue's extensions in tx, the transaction
// that records what they are for.
func (q *Queue) InsertTx(ctx context.Context, tx *sql.Tx, jobs []river.InsertManyParams) error {
	if len(jobs) == 0 {
		return nil
	}
	_, err := q.client.InsertManyFastTx(ctx, tx, jobs)
	return wrap(err, "insert jobs")
}

// Insert writes one job of the Queue's extensions (a replay).
func (q *Queue) Insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) error {
	_, err := q.client.Insert(ctx, args, opts)
	return wrap(err, "insert job")
}

// OldestJob is when the oldest job of kinds that has not finished was
// written, and whether there is one.
func (q *Queue) OldestJob(ctx context.Context, kinds ...string) (time.Time, bool, error) {
	params := river.NewJobListParams().Kinds(kinds...).
		States(rivertype.JobStateAvailable, rivertype.JobStatePending, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled).
		OrderBy(river.JobListOrderByID, river.SortOrderAsc).First(1)
	page, err := q.client.JobList(ctx, params)
	if err != nil || len(page.Jobs) == 0 {
		return time.Time{}, false, wrap(err, "list oldest job")
	}
	return page.Jobs[0].CreatedAt, true, nil
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
// Config does not expose (TestRiverAgrees checks what it stands for).
const schedulerInterval = 5 * time.Second

// RunnableSnooze is the longest snooze after which River makes a job
// available itself, without its leader's scheduler: a job found early
// waits in snoozes of at most this.
const RunnableSnooze = schedulerInterval

func wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("hold: %s: %w", what, err)
}

// dueWorker runs a scheduled message's job. River completes it when
// Work returns; a crash between the message's outcome and that leaves
// the job running until River's rescuer runs it again, and the message,
// no longer scheduled at its version, makes that run a no-op.
type dueWorker struct {
	river.WorkerDefaults[dueArgs]
	q       *Queue
	timeout time.Duration
}

func (w *dueWorker) Timeout(*river.Job[dueArgs]) time.Duration { return w.timeout }

func (w *dueWorker) Work(ctx context.Context, job *river.Job[dueArgs]) error {
	again := w.q.again(ctx, job.JobRow, slog.String("message_id", job.Args.MessageID))
	return result(w.q.d.dispatchDue(ctx, job.Args.MessageID, job.Args.Due, again))
}

// laneWorker runs an inbox's lane job.
type laneWorker struct {
	river.WorkerDefaults[laneArgs]
	q       *Queue
	timeout time.Duration
}

func (w *laneWorker) Timeout(*river.Job[laneArgs]) time.Duration { return w.timeout }

func (w *laneWorker) Work(ctx context.Context, job *river.Job[laneArgs]) error {
	// The lane ends in the transaction that finds it empty (store.EndLane):
	// completed there, no message can be queued after the check without
	// writing a job of its own.
	end := func(ctx context.Context, tx *sql.Tx) error {
		var err error
		if w.q.o.Driver == store.DriverSQLite {
			_, err = river.JobCompleteTx[*riversqlite.Driver](ctx, tx, job)
		} else {
			_, err = river.JobCompleteTx[*riverdatabasesql.Driver](ctx, tx, job)
		}
		return wrap(err, "complete lane job")
	}
	again := w.q.again(ctx, job.JobRow, slog.String("inbox_id", job.Args.InboxID))
	return result(w.q.d.dispatchLane(ctx, job.Args.InboxID, again, end))
}

// again says a job ran before without finishing: its run failed, or its
// server died and River's rescuer gave it back (a snooze is no attempt).
// It logs that the job is taken up again: after a crash, the moment that
// RescueBound bounds, whatever the server then has to send before it.
func (q *Queue) again(ctx context.Context, job *rivertype.JobRow, about slog.Attr) bool {
	if job.Attempt <= 1 {
		return false
	}
	q.logger.InfoContext(ctx, TakenUpAgain, about, slog.Int("attempt", job.Attempt))
	return true
}

// TakenUpAgain is the message of the log line of a held-message job run
// again after a run that did not finish.
const TakenUpAgain = "held-message job taken up again after a run that did not finish"

// result maps a dispatch's step to what River does with the job.
func result(s step, err error) error {
	switch {
	case err != nil:
		return err
	case s.snooze > 0:
		return river.JobSnooze(s.snooze)
	}
	return nil
}

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
// for laneRun, and each of them ends by the end of its lease, at most
// longestLease. The send bounds itself by its lease, so the timeout never
// cuts one off.
func JobTimeout(longestLease time.Duration) time.Duration {
	return laneRun + longestLease + jobGrace
}

// RescueBound is the longest a held message whose job a dead server held
// waits before a live server (or the same one restarted) takes the job up
// again (it logs TakenUpAgain) and dispatches it, behind whatever else
// that server has to send:
// the job's timeout, River's rescuer's interval, the dead leader's
// leadership when it was the leader, and River's scheduler, which makes
// the rescued job available.
func RescueBound(longestLease time.Duration) time.Duration {
	return JobTimeout(longestLease) + riverRescueInterval + riverLeaderGap + schedulerInterval
}
