package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// TestDeleteInboxWaitsForLiveSends: a send in flight (its slot not yet
// counted, its deadline ahead) holds its inbox's deletion, whichever
// server made it, until it is settled or its deadline passes (a crashed
// server's, which can record nothing more); one whose deadline has passed
// does not hold it at all. On PostgreSQL the deletion holds the inbox's
// row all the while, and a send's outcome is recorded meanwhile. The
// deletion's clock is a fake one, which the test moves.
func TestDeleteInboxWaitsForLiveSends(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		first := sendWithSlot(t, s, in, 0, time.Minute)
		sendWithSlot(t, s, in, 0, 2*time.Minute)        // crashed: never settled
		sendWithSlot(t, s, in, -time.Hour, time.Minute) // crashed long ago

		clk := clocktest.New(t0.Add(time.Second))
		deleted := make(chan error, 1)
		go func() { deleted <- s.DeleteInbox(ctx, in.ID, clk) }()
		for clk.Timers() == 0 { // until the deletion waits
			select {
			case err := <-deleted:
				t.Fatalf("DeleteInbox with sends in flight: %v, before any was settled", err)
			case <-time.After(time.Millisecond):
			}
		}
		settle(t, s, first, StatusSent, &t0) // recorded while the deletion waits
		clk.Advance(time.Minute)
		select {
		case err := <-deleted:
			t.Fatalf("DeleteInbox with a send still in flight: %v", err)
		default:
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM messages WHERE id = ? AND status = ?", first.ID, StatusSent); n != 1 {
			t.Errorf("the settled send's record: %d rows, want 1 before the deletion", n)
		}
		for { // past the last deadline: the next look deletes
			clk.Advance(time.Minute)
			select {
			case err := <-deleted:
				if err != nil {
					t.Fatalf("DeleteInbox once the last deadline has passed: %v", err)
				}
				if err := s.DeleteInbox(ctx, in.ID, clk); !errors.Is(err, ErrNotFound) {
					t.Errorf("second DeleteInbox: %v, want ErrNotFound", err)
				}
				return
			case <-time.After(time.Millisecond):
			}
		}
	})
}

// TestClaimHeldAfterItsInboxIsGone: a held message whose inbox was
// deleted is not claimed (ErrNotFound), and leaves no slot.
func TestClaimHeldAfterItsInboxIsGone(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		m := &Message{InboxID: in.ID, Status: StatusScheduled, MessageIDHeader: "<h@example.com>", Subject: "s",
			FromAddress: in.EmailAddress, CreatedAt: t0}
		noJob := func(context.Context, *sql.Tx) error { return nil }
		if err := s.CreateHeldMessage(ctx, m, nil, &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}, noJob); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteInbox(ctx, in.ID, clocktest.New(t0)); err != nil {
			t.Fatal(err)
		}
		slot := &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute)}
		if err := s.ClaimHeld(ctx, m, slot); !errors.Is(err, ErrNotFound) {
			t.Errorf("ClaimHeld of a message whose inbox is gone: %v, want ErrNotFound", err)
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE id = ?", m.ID); n != 0 {
			t.Errorf("%d slots left by a claim that found nothing, want 0", n)
		}
	})
}

// TestSendsWaitForADeletionUnderWay: a send's first write that comes
// while its inbox's deletion holds the inbox's row (past its check of
// send_log, before its cascade) waits for the deletion and then finds no
// inbox: nothing recorded, no slot. A held message's claim, an UPDATE of
// the message, took no lock on the inbox and went ahead, its slot unseen
// by the deletion, which then cascaded the message away from under its
// send; a reply locked its thread before the inbox (the message's foreign
// key is checked at the statement's end) and deadlocked with the
// deletion's cascade. PostgreSQL only: the SQLite Store has one
// connection, so a deletion's transaction is never interleaved with a
// send's write.
func TestSendsWaitForADeletionUnderWay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := migratedStore(t, DriverPostgres)
	slot := func(in *Inbox) *SendSlot {
		return &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute)}
	}
	t.Run("claim", func(t *testing.T) {
		in := mustCreateInbox(t, s, "claim@example.com")
		m := &Message{InboxID: in.ID, Status: StatusScheduled, MessageIDHeader: "<h@example.com>", Subject: "s",
			FromAddress: in.EmailAddress, CreatedAt: t0}
		noJob := func(context.Context, *sql.Tx) error { return nil }
		if err := s.CreateHeldMessage(ctx, m, nil, &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}, noJob); err != nil {
			t.Fatal(err)
		}
		err := whileDeleting(t, s, in.ID, func() error { return s.ClaimHeld(ctx, m, slot(in)) })
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("the claim after the deletion: %v, want ErrNotFound", err)
		}
	})
	t.Run("reply", func(t *testing.T) {
		in := mustCreateInbox(t, s, "reply@example.com")
		_, th := mustSend(t, s, in, nil, t0, nil)
		err := whileDeleting(t, s, in.ID, func() error {
			m := &Message{InboxID: in.ID, ThreadID: th.ID, MessageIDHeader: "<r@example.com>", CreatedAt: t0}
			return s.CreateMessage(ctx, m, nil, nil, slot(in))
		})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("the reply after the deletion: %v, want ErrNotFound", err)
		}
	})
	if n := countRows(t, s, "SELECT COUNT(*) FROM send_log"); n != 0 {
		t.Errorf("%d slots left by sends that found nothing, want 0", n)
	}
}

// whileDeleting runs write while a deletion of inbox id, as DeleteInbox
// runs it, holds the inbox's row: write must wait for it (the test fails
// if it returns first), and the deletion then goes ahead. It returns
// write's error.
func whileDeleting(t *testing.T, s *Store, id string, write func() error) error {
	t.Helper()
	del, err := s.sqlDB.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer del.Rollback()
	if _, err := del.Exec(`SELECT id FROM inboxes WHERE id = $1 FOR UPDATE`, id); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- write() }()
	for waiting := false; !waiting; { // until the write waits for a lock
		select {
		case err := <-done:
			t.Fatalf("the write went ahead (%v) while the inbox's deletion held its row", err)
		case <-time.After(5 * time.Millisecond):
		}
		err := s.sqlDB.QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := del.Exec(`DELETE FROM inboxes WHERE id = $1`, id); err != nil {
		t.Fatalf("the deletion's cascade: %v", err)
	}
	if err := del.Commit(); err != nil {
		t.Fatal(err)
	}
	return <-done
}
