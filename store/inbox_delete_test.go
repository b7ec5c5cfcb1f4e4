package store

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"
)

// TestDeleteInboxWaitsForLiveSends: a send in flight (its slot not yet
// counted, its deadline ahead) holds its inbox's deletion, whichever
// server made it; once settled, or once its deadline has passed (a crashed
// server's, which can record nothing more), it does not.
func TestDeleteInboxWaitsForLiveSends(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		first := sendWithSlot(t, s, in, 0, time.Minute)
		sendWithSlot(t, s, in, 0, 2*time.Minute) // crashed: never settled

		err := s.DeleteInbox(ctx, in.ID, t0.Add(time.Second))
		var busy *InboxBusyError
		if !errors.As(err, &busy) || !errors.Is(err, ErrInboxBusy) {
			t.Fatalf("DeleteInbox with sends in flight: %v, want an *InboxBusyError", err)
		}
		if want := t0.Add(2 * time.Minute); !busy.Until.Equal(want) {
			t.Errorf("busy until %s, want %s (the latest deadline)", busy.Until, want)
		}
		if _, err := s.Inbox(ctx, in.ID); err != nil {
			t.Fatalf("the inbox after a refused deletion: %v", err)
		}

		settle(t, s, first, StatusSent, &t0)
		err = s.DeleteInbox(ctx, in.ID, t0.Add(time.Minute+time.Second))
		if !errors.As(err, &busy) || !busy.Until.Equal(t0.Add(2*time.Minute)) {
			t.Fatalf("DeleteInbox with one send settled, one in flight: %v", err)
		}
		if err := s.DeleteInbox(ctx, in.ID, t0.Add(2*time.Minute)); err != nil {
			t.Fatalf("DeleteInbox once the last deadline has passed: %v", err)
		}
		if err := s.DeleteInbox(ctx, in.ID, t0.Add(2*time.Minute)); !errors.Is(err, ErrNotFound) {
			t.Errorf("second DeleteInbox: %v, want ErrNotFound", err)
		}
	})
}

// TestClaimHeldAfterItsInboxIsGone: a held message whose inbox was
// deleted is not claimed (ErrNotFound), and leaves no slot.
func TestClaimHeldAfterItsInboxIsGone(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		m := &Message{InboxID: in.ID, Status: StatusScheduled, MessageIDHeader: "<h@example.com>", Subject: "s",
			FromAddress: in.EmailAddress, CreatedAt: t0}
		noJob := func(context.Context, *sql.Tx) error { return nil }
		if err := s.CreateHeldMessage(ctx, m, nil, &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}, noJob); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteInbox(ctx, in.ID, t0); err != nil {
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
