package hold

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/nornweave/nornweave/store"
)

// ScaledRetry keeps River's schedule, attempt⁴ with its ±10% jitter, in
// units of Base instead of seconds.
func TestScaledRetry(t *testing.T) {
	const base = 10 * time.Millisecond
	for errs, want := range []time.Duration{base, 16 * base, 81 * base, 256 * base} {
		job := &rivertype.JobRow{Errors: make([]rivertype.AttemptError, errs)}
		before := time.Now()
		next := ScaledRetry{Base: base}.NextRetry(job)
		after := time.Now()
		if lo, hi := before.Add(want*9/10), after.Add(want*11/10); next.Before(lo) || next.After(hi) {
			t.Errorf("after %d errors: next retry in %v, want %v ±10%%", errs+1, next.Sub(before), want)
		}
	}
}

// Options.RetryPolicy is River's: a job whose dispatch failed is scheduled
// again by it, here a millisecond later where River's default waits a
// second. The second run holds the job while its row is read, so the
// schedule it ran by is still there to see.
func TestQueueRetryPolicy(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(t.TempDir(), "nw.db"),
		Schemas: []store.Schema{Schema(store.DriverSQLite)}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	fs := &failOnce{Store: st, second: make(chan struct{}), release: make(chan struct{})}
	q, err := New(Options{DB: st.SQL(), Driver: store.DriverSQLite, Store: fs, RetryPolicy: ScaledRetry{Base: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := st.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Due("m1", time.Now())(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := q.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	defer func() {
		close(fs.release)
		if err := q.Stop(ctx); err != nil {
			t.Error(err)
		}
	}()
	<-fs.second
	res, err := q.client.JobList(ctx, river.NewJobListParams().Kinds(KindDue))
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("JobList = %v, %v; want the one due job", res, err)
	}
	job := res.Jobs[0]
	if len(job.Errors) != 1 {
		t.Fatalf("the second run sees %d errors, want 1", len(job.Errors))
	}
	// River's default: a second, ±10% of jitter.
	if wait := job.ScheduledAt.Sub(job.Errors[0].At); wait >= 500*time.Millisecond {
		t.Errorf("retried %v after its failure, want about a millisecond (River's default: 1 s)", wait)
	}
}

// failOnce fails the first DueMessage, and holds the second until release.
type failOnce struct {
	*store.Store
	calls           atomic.Int32
	second, release chan struct{}
}

func (s *failOnce) DueMessage(ctx context.Context, id string) (*store.Message, bool, error) {
	switch s.calls.Add(1) {
	case 1:
		return nil, false, errors.New("database down")
	case 2:
		close(s.second)
		<-s.release
	}
	return nil, false, store.ErrNotFound // the job finishes
}
