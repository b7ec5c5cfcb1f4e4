package store

import (
	"context"
	"database/sql"
	"errors"
	"reflect"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "lane@example.com")
		later := mustHold(t, s, in, StatusQueued, t0.Add(time.Minute))
		first := mustHold(t, s, in, StatusQueued, t0)
		sched := mustHold(t, s, in, StatusScheduled, t0.Add(30*time.Second))
		if _, err := s.QueueHeld(ctx, sched, t0.Add(time.Hour), noJob); err != nil {
			t.Fatalf("QueueHeld: %v", err)
		}
		var order []string
		for range 3 {
			head, err := s.LaneHead(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			order = append(order, head.ID)
			if _, err := s.FailHeld(ctx, head, "test"); err != nil {
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
	t.Parallel()
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

// FinishHeld records a dispatched message's outcome and settles its slot:
// sent (slot counted), or put back queued (slot removed, next attempt set).
func TestFinishHeld(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "finish@example.com")
		claim := func() *Message {
			m := mustHold(t, s, in, StatusScheduled, t0)
			if err := s.ClaimHeld(ctx, m, &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute)}); err != nil {
				t.Fatal(err)
			}
			return m
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
		sent := claim()
		pid, at := "provider-1", t0.Add(time.Second)
		if err := s.FinishHeld(ctx, sent.ID, Outcome{Status: StatusSent, ProviderMessageID: &pid, SentAt: &at, CountedAt: &at}); err != nil {
			t.Fatal(err)
		}
		m, err := s.Message(ctx, sent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if m.Status != StatusSent || m.ProviderMessageID == nil || *m.ProviderMessageID != pid || m.SentAt == nil || !m.SentAt.Equal(at) {
			t.Errorf("sent: got %s, %v, %v", m.Status, m.ProviderMessageID, m.SentAt)
		}
		if found, counted := slot(sent.ID); !found || counted == nil || !counted.Equal(at) {
			t.Errorf("sent: slot found %v, counted at %v; want counted at %v", found, counted, at)
		}
		back := claim()
		next := t0.Add(time.Hour)
		if err := s.FinishHeld(ctx, back.ID, Outcome{Status: StatusQueued, NextAttemptAt: &next}); err != nil {
			t.Fatal(err)
		}
		if m, err = s.Message(ctx, back.ID); err != nil {
			t.Fatal(err)
		}
		if m.Status != StatusQueued || m.NextAttemptAt == nil || !m.NextAttemptAt.Equal(next) {
			t.Errorf("put back: got %s, next attempt %v; want queued, %v", m.Status, m.NextAttemptAt, next)
		}
		if found, _ := slot(back.ID); found {
			t.Error("put back: its slot is still in the log, want it removed")
		}
	})
}

// A dispatch changes a held message only at the version it read it at: a
// reschedule or cancel answered meanwhile wins over the claim, the
// queueing and the failing of the message as it was (issue 26: a PATCH
// answered 200, and the message went out at its old time).
func TestHeldChangesKeepToTheVersionRead(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "version@example.com")
		slot := func() *SendSlot {
			return &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute)}
		}
		dispatch := map[string]func(m *Message) error{
			"claim": func(m *Message) error { return s.ClaimHeld(ctx, m, slot()) },
			"queue": func(m *Message) error { _, err := s.QueueHeld(ctx, m, t0, noJob); return err },
			"fail":  func(m *Message) error { _, err := s.FailHeld(ctx, m, "expired"); return err },
		}
		for name, f := range dispatch {
			read := mustHold(t, s, in, StatusScheduled, t0)
			if read.Version != 1 {
				t.Fatalf("a held message is accepted at version %d, want 1", read.Version)
			}
			later := t0.Add(24 * time.Hour)
			if _, err := s.RescheduleHeld(ctx, read.ID, later, noJob); err != nil {
				t.Fatal(err)
			}
			if err := f(read); !errors.Is(err, ErrNotHeld) {
				t.Fatalf("%s of the message as read before a reschedule: %v, want ErrNotHeld", name, err)
			}
			m, err := s.Message(ctx, read.ID)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != StatusScheduled || !m.ScheduledAt.Equal(later) || m.Version != 2 {
				t.Errorf("after a %s that lost: %s at %v, version %d; want scheduled at %v, version 2", name, m.Status, m.ScheduledAt, m.Version, later)
			}
			if n := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE id = ?", m.ID); n != 0 {
				t.Errorf("after a %s that lost: %d slots, want none", name, n)
			}
			if err := f(m); err != nil {
				t.Errorf("%s at the version read: %v", name, err)
			}
		}
	})
}

// EndLane runs its job only when the inbox has no queued mail.
func TestEndLaneOnlyWhenEmpty(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "end@example.com")
		ran := 0
		end := func(context.Context, *sql.Tx) error { ran++; return nil }
		m := mustHold(t, s, in, StatusQueued, t0)
		if ended, err := s.EndLane(ctx, in.ID, end); err != nil || ended || ran != 0 {
			t.Fatalf("EndLane with a message queued: ended %v, %v, job ran %d times; want not ended", ended, err, ran)
		}
		if _, err := s.CancelHeld(ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		if ended, err := s.EndLane(ctx, in.ID, end); err != nil || !ended || ran != 1 {
			t.Fatalf("EndLane of an empty lane: ended %v, %v, job ran %d times; want ended once", ended, err, ran)
		}
	})
}
