package store

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
)

// mustHold stores a held message with status (and a job callback that
// records it ran in the same transaction), in a new thread.
func mustHold(t *testing.T, s *Store, in *Inbox, status string, at time.Time) *Message {
	t.Helper()
	m := &Message{InboxID: in.ID, Status: status, MessageIDHeader: "<h@example.com>", Subject: "Held",
		FromAddress: in.EmailAddress, ToAddresses: StringList{"to@example.org"}, CreatedAt: at}
	if status == StatusScheduled {
		m.ScheduledAt = &at
	} else {
		m.NextAttemptAt = &at
	}
	ran := false
	job := func(_ context.Context, tx *sql.Tx) error {
		ran = tx != nil
		return nil
	}
	th := &Thread{InboxID: in.ID, Subject: m.Subject, ParticipantHash: "h"}
	if err := s.CreateHeldMessage(context.Background(), m, nil, th, job); err != nil {
		t.Fatalf("CreateHeldMessage: %v", err)
	}
	if !ran {
		t.Fatal("the job was not written in the message's transaction")
	}
	return m
}

// A job that fails undoes the message: the two are stored together or not
// at all.
func TestCreateHeldMessageIsOneTransaction(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "held@example.com")
		m := &Message{InboxID: in.ID, Status: StatusScheduled, MessageIDHeader: "<x@example.com>", Subject: "x",
			FromAddress: in.EmailAddress, CreatedAt: t0, ScheduledAt: &t0}
		boom := errors.New("boom")
		err := s.CreateHeldMessage(ctx, m, nil, &Thread{InboxID: in.ID, Subject: "x", ParticipantHash: "h"},
			func(context.Context, *sql.Tx) error { return boom })
		if !errors.Is(err, boom) {
			t.Fatalf("CreateHeldMessage = %v, want the job's error", err)
		}
		if _, err := s.Message(ctx, m.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("message after a failed job: %v, want ErrNotFound", err)
		}
	})
}

// Of a dispatch's claim and a cancel racing on one held message, exactly
// one wins; the loser gets ErrNotHeld.
func TestClaimAndCancelExactlyOneWins(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "race@example.com")
		for range 20 {
			m := mustHold(t, s, in, StatusQueued, t0)
			var (
				wg                  sync.WaitGroup
				claimErr, cancelErr error
			)
			wg.Go(func() {
				claimErr = s.ClaimHeld(ctx, m, &SendSlot{Scope: "race@example.com", ReservedAt: t0, Deadline: t0.Add(time.Minute)})
			})
			wg.Go(func() { _, cancelErr = s.CancelHeld(ctx, m.ID) })
			wg.Wait()
			if (claimErr == nil) == (cancelErr == nil) {
				t.Fatalf("claim %v, cancel %v: want exactly one to win", claimErr, cancelErr)
			}
			lost := claimErr
			if lost == nil {
				lost = cancelErr
			}
			if !errors.Is(lost, ErrNotHeld) {
				t.Fatalf("loser's error %v, want ErrNotHeld", lost)
			}
			got, err := s.Message(ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			want := StatusSending
			if cancelErr == nil {
				want = StatusCanceled
			}
			if got.Status != want {
				t.Fatalf("status %s, want %s", got.Status, want)
			}
			slots := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE id = ?", m.ID)
			if (slots == 1) != (claimErr == nil) {
				t.Fatalf("%d slots in the throttle's log, want one only for a claim", slots)
			}
		}
	})
}

// The lane is an inbox's queued messages in the order they became due; the
// other transitions keep to held messages.
func TestLaneOrderAndHeldTransitions(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "lane@example.com")
		later := mustHold(t, s, in, StatusQueued, t0.Add(time.Minute))
		first := mustHold(t, s, in, StatusQueued, t0)
		sched := mustHold(t, s, in, StatusScheduled, t0.Add(30*time.Second))
		if _, err := s.QueueHeld(ctx, sched.ID, t0.Add(time.Hour), noJob); err != nil {
			t.Fatalf("QueueHeld: %v", err)
		}
		var order []string
		for range 3 {
			head, err := s.LaneHead(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, head.ID)
			if _, err := s.FailHeld(ctx, head.ID, "test", noJob); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{first.ID, sched.ID, later.ID}; !equalStrings(order, want) {
			t.Errorf("lane order %v, want %v (by due time)", order, want)
		}
		if _, err := s.LaneHead(ctx, in.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("empty lane: %v, want ErrNotFound", err)
		}
		if _, err := s.CancelHeld(ctx, first.ID); !errors.Is(err, ErrNotHeld) {
			t.Errorf("cancel of a failed message: %v, want ErrNotHeld", err)
		}
		if _, err := s.RescheduleHeld(ctx, "no-such-id", t0, noJob); !errors.Is(err, ErrNotFound) {
			t.Errorf("reschedule of a missing message: %v, want ErrNotFound", err)
		}
		st, err := s.HeldStats(ctx)
		if err != nil || st.Count[StatusQueued] != 0 || st.Count[StatusScheduled] != 0 {
			t.Errorf("HeldStats = %+v, %v; want nothing held", st, err)
		}
	})
}

func noJob(context.Context, *sql.Tx) error { return nil }

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// DueMessage reads the message as Message does, and says whether its own
// inbox has queued mail.
func TestDueMessageSaysWhetherItsLaneIsBusy(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in, other := mustCreateInbox(t, s, "due@example.com"), mustCreateInbox(t, s, "other@example.com")
		m := mustHold(t, s, in, StatusScheduled, t0)
		mustHold(t, s, other, StatusQueued, t0)
		check := func(wantBusy bool) {
			t.Helper()
			got, busy, err := s.DueMessage(ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			want, err := s.Message(ctx, m.ID)
			if err != nil {
				t.Fatal(err)
			}
			if busy != wantBusy || !reflect.DeepEqual(got, want) {
				t.Fatalf("DueMessage = %+v, busy %v; want %+v, busy %v", got, busy, want, wantBusy)
			}
		}
		check(false) // another inbox's queued mail is not this lane's
		mustHold(t, s, in, StatusQueued, t0)
		check(true)
		if _, _, err := s.DueMessage(ctx, "no-such-message"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("DueMessage of an unknown id: %v, want ErrNotFound", err)
		}
	})
}

// FinishHeld records a dispatched message's outcome, settles its slot and
// completes the job, both or neither: sent (slot counted), put back queued
// (slot removed, next attempt set), and nothing at all when the job's
// change fails. The same with the job as one statement (Completion.SQL),
// which PostgreSQL makes part of the outcome's own; a job table of the
// test's stands for River's.
func TestFinishHeld(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "finish@example.com")
		if err := s.db.Exec("CREATE TABLE test_job (id INTEGER PRIMARY KEY, state TEXT NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		jobs := 0
		claim := func() (*Message, int) {
			m := mustHold(t, s, in, StatusScheduled, t0)
			if err := s.ClaimHeld(ctx, m, &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			jobs++
			if err := s.db.Exec("INSERT INTO test_job (id, state) VALUES (?, 'running')", jobs).Error; err != nil {
				t.Fatal(err)
			}
			return m, jobs
		}
		slot := func(id string) (found bool, counted *time.Time) {
			var sl SendSlot
			err := s.db.Where("id = ?", id).Take(&sl).Error
			if errors.Is(err, gorm.ErrRecordNotFound) {
				return false, nil
			} else if err != nil {
				t.Fatal(err)
			}
			return true, sl.CountedAt
		}
		complete := func(id int, asSQL bool) Completion {
			c := Completion{Tx: func(ctx context.Context, tx *sql.Tx) error {
				q := "UPDATE test_job SET state = 'done' WHERE id = ? AND state = 'running'"
				if s.driver == DriverPostgres {
					q = strings.Replace(q, "?", "$1", 1)
				}
				res, err := tx.ExecContext(ctx, q, id)
				if err != nil {
					return err
				}
				if n, _ := res.RowsAffected(); n != 1 {
					return errors.New("job not running")
				}
				return nil
			}}
			if asSQL {
				c.SQL = &JobSQL{SQL: "UPDATE test_job SET state = 'done' WHERE id = ? AND state = 'running' RETURNING id",
					Args: func() []any { return []any{id} }, What: "complete test job"}
			}
			return c
		}
		state := func(id int) (st string) {
			if err := s.db.Raw("SELECT state FROM test_job WHERE id = ?", id).Scan(&st).Error; err != nil {
				t.Fatal(err)
			}
			return st
		}
		for _, asSQL := range []bool{false, true} {
			sent, job := claim()
			pid, at := "provider-1", t0.Add(time.Second)
			if err := s.FinishHeld(ctx, sent.ID, Outcome{Status: StatusSent, ProviderMessageID: &pid, SentAt: &at, CountedAt: &at}, complete(job, asSQL)); err != nil {
				t.Fatal(err)
			}
			m, err := s.Message(ctx, sent.ID)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != StatusSent || m.ProviderMessageID == nil || *m.ProviderMessageID != pid || m.SentAt == nil || !m.SentAt.Equal(at) {
				t.Errorf("sent (as SQL %v): got %s, %v, %v", asSQL, m.Status, m.ProviderMessageID, m.SentAt)
			}
			if found, counted := slot(sent.ID); !found || counted == nil || !counted.Equal(at) {
				t.Errorf("sent (as SQL %v): slot found %v, counted at %v; want counted at %v", asSQL, found, counted, at)
			}
			if st := state(job); st != "done" {
				t.Errorf("sent (as SQL %v): job %s, want done", asSQL, st)
			}

			back, job := claim()
			next := t0.Add(time.Hour)
			if err := s.FinishHeld(ctx, back.ID, Outcome{Status: StatusQueued, NextAttemptAt: &next}, complete(job, asSQL)); err != nil {
				t.Fatal(err)
			}
			if m, err = s.Message(ctx, back.ID); err != nil {
				t.Fatal(err)
			}
			if m.Status != StatusQueued || m.NextAttemptAt == nil || !m.NextAttemptAt.Equal(next) {
				t.Errorf("put back (as SQL %v): got %s, next attempt %v; want queued, %v", asSQL, m.Status, m.NextAttemptAt, next)
			}
			if found, _ := slot(back.ID); found {
				t.Errorf("put back (as SQL %v): its slot is still in the log, want it removed", asSQL)
			}
			if st := state(job); st != "done" {
				t.Errorf("put back (as SQL %v): job %s, want done", asSQL, st)
			}

			undone, job := claim()
			if err := s.db.Exec("UPDATE test_job SET state = 'gone' WHERE id = ?", job).Error; err != nil {
				t.Fatal(err)
			}
			if err := s.FinishHeld(ctx, undone.ID, Outcome{Status: StatusSent, SentAt: &at, CountedAt: &at}, complete(job, asSQL)); err == nil {
				t.Fatalf("FinishHeld (as SQL %v) with a job not running succeeded", asSQL)
			}
			if m, err = s.Message(ctx, undone.ID); err != nil || m.Status != StatusSending {
				t.Errorf("after a failed job (as SQL %v): %v, %v; want the message still sending", asSQL, m.Status, err)
			}
			if found, counted := slot(undone.ID); !found || counted != nil {
				t.Errorf("after a failed job (as SQL %v): slot found %v, counted %v; want it in flight", asSQL, found, counted)
			}
		}
	})
}
