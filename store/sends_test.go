package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// sendWithSlot records a message in flight with its slot, reserved at
// t0+reserved and due by t0+reserved+lease, as the send pipeline does.
func sendWithSlot(t *testing.T, s *Store, in *Inbox, reserved, lease time.Duration) *Message {
	t.Helper()
	at := t0.Add(reserved)
	m := &Message{InboxID: in.ID, Status: StatusSending, MessageIDHeader: "<x@example.com>", Subject: "s",
		FromAddress: in.EmailAddress, CreatedAt: at}
	slot := &SendSlot{Scope: in.EmailAddress, ReservedAt: at, Deadline: at.Add(lease)}
	if err := s.CreateMessage(context.Background(), m, nil, &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}, slot); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	return m
}

func settle(t *testing.T, s *Store, m *Message, status string, counted *time.Time) {
	t.Helper()
	if err := s.UpdateMessageOutcome(context.Background(), m.ID, Outcome{Status: status, SentAt: counted, CountedAt: counted}); err != nil {
		t.Fatalf("UpdateMessageOutcome: %v", err)
	}
}

func counted(t *testing.T, s *Store, since time.Time) string {
	t.Helper()
	sends, err := s.CountedSends(context.Background(), since)
	if err != nil {
		t.Fatalf("CountedSends: %v", err)
	}
	var got []time.Time
	for _, c := range sends {
		if c.At.Location() != time.UTC || c.Scope == "" {
			t.Errorf("got %+v, want UTC with its inbox", c)
		}
		got = append(got, c.At)
	}
	return fmt.Sprint(got)
}

// TestSendLogOutcomes: a sent or possibly-sent message counts from its
// outcome's time, a failed one leaves no slot, one in flight is not counted
// yet, and a counted one older than since is not returned.
func TestSendLogOutcomes(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		in := mustCreateInbox(t, s, "a@example.com")
		at := func(d time.Duration) *time.Time { v := t0.Add(d); return &v }
		sent := sendWithSlot(t, s, in, 0, time.Minute)
		settle(t, s, sent, StatusSent, at(2*time.Second))
		unknown := sendWithSlot(t, s, in, time.Second, time.Minute)
		settle(t, s, unknown, StatusFailed, at(20*time.Second)) // may have gone out
		failed := sendWithSlot(t, s, in, 2*time.Second, time.Minute)
		settle(t, s, failed, StatusFailed, nil)
		sendWithSlot(t, s, in, 3*time.Second, time.Minute) // in flight
		old := sendWithSlot(t, s, in, -2*time.Hour, time.Minute)
		settle(t, s, old, StatusSent, at(-2*time.Hour))

		want := fmt.Sprint([]time.Time{t0.Add(2 * time.Second), t0.Add(20 * time.Second)})
		if got := counted(t, s, t0.Add(-time.Hour).In(time.FixedZone("X", -7*3600))); got != want {
			t.Errorf("counted sends: got %v, want %v", got, want)
		}
	})
}

// TestSendLogSurvivesInboxDeletion is hole 1: deleting an inbox deletes its
// messages, and used to make a restarted throttle forget their sends.
func TestSendLogSurvivesInboxDeletion(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		m := sendWithSlot(t, s, in, 0, time.Minute)
		settle(t, s, m, StatusSent, &t0)
		inFlight := sendWithSlot(t, s, in, time.Second, time.Minute)
		// Deleted once the in-flight send's lease is over, as after a
		// crash: a live one holds the deletion (TestDeleteInboxWaitsForLiveSends).
		if err := s.DeleteInbox(ctx, in.ID, clocktest.New(t0.Add(2*time.Minute))); err != nil {
			t.Fatalf("DeleteInbox: %v", err)
		}
		// The provider answers after the inbox is gone: the message row is
		// missing, the slot must be settled all the same.
		later := t0.Add(5 * time.Second)
		err := s.UpdateMessageOutcome(ctx, inFlight.ID, Outcome{Status: StatusSent, SentAt: &later, CountedAt: &later})
		if !errors.Is(err, ErrNotFound) {
			t.Errorf("outcome of a deleted message: got %v, want ErrNotFound", err)
		}
		want := fmt.Sprint([]time.Time{t0, later})
		if got := counted(t, s, t0.Add(-time.Minute)); got != want {
			t.Errorf("counted sends after the inbox was deleted: got %v, want %v", got, want)
		}
	})
}

// TestResolveInterrupted is holes 2 and 3: a send a crash left in flight
// counts from its deadline (when it could still have gone out), or from the
// restart if that came first; and it keeps counting after a second restart.
func TestResolveInterrupted(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		due := sendWithSlot(t, s, in, 0, 30*time.Second)            // deadline t0+30s, before the restart
		notDue := sendWithSlot(t, s, in, 50*time.Second, time.Hour) // deadline after the restart
		restart := t0.Add(time.Minute)

		n, err := s.ResolveInterrupted(ctx, restart, nil)
		if err != nil || n != 2 {
			t.Fatalf("ResolveInterrupted: got (%d, %v), want (2, nil)", n, err)
		}
		want := fmt.Sprint([]time.Time{t0.Add(30 * time.Second), restart})
		if got := counted(t, s, t0.Add(-time.Hour)); got != want {
			t.Errorf("after the first restart: got %v, want %v", got, want)
		}
		for _, id := range []string{due.ID, notDue.ID} {
			m, err := s.Message(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if m.Status != StatusFailed || m.Error == nil || *m.Error != interruptedError {
				t.Errorf("interrupted message: got %q %v, want failed with %q", m.Status, m.Error, interruptedError)
			}
		}

		if n, err := s.ResolveInterrupted(ctx, restart.Add(time.Minute), nil); err != nil || n != 0 {
			t.Errorf("second ResolveInterrupted: got (%d, %v), want (0, nil)", n, err)
		}
		if got := counted(t, s, t0.Add(-time.Hour)); got != want {
			t.Errorf("after the second restart: got %v, want %v (still counted)", got, want)
		}
	})
}

func TestPruneSendLog(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		old := sendWithSlot(t, s, in, -2*time.Hour, time.Minute)
		settle(t, s, old, StatusSent, &old.CreatedAt)
		recent := sendWithSlot(t, s, in, 0, time.Minute)
		settle(t, s, recent, StatusSent, &t0)
		sendWithSlot(t, s, in, -3*time.Hour, time.Minute) // in flight: never pruned

		if n, err := s.PruneSendLog(ctx, t0.Add(-time.Hour)); err != nil || n != 1 {
			t.Fatalf("PruneSendLog: got (%d, %v), want (1, nil)", n, err)
		}
		if got, want := counted(t, s, t0.Add(-24*time.Hour)), fmt.Sprint([]time.Time{t0}); got != want {
			t.Errorf("after pruning: got %v, want %v", got, want)
		}
		if n, err := s.ResolveInterrupted(ctx, t0, nil); err != nil || n != 1 {
			t.Errorf("the in-flight slot was pruned: ResolveInterrupted got (%d, %v), want (1, nil)", n, err)
		}
	})
}

// TestPendingSends lists the sends in flight until a deadline after now,
// each with its inbox's scope: what a lost shared throttle state is
// rebuilt with.
func TestPendingSends(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		in := mustCreateInbox(t, s, "p@example.com")
		sendWithSlot(t, s, in, 0, time.Minute)                   // in flight until t0+1m
		sendWithSlot(t, s, in, -2*time.Minute, time.Minute)      // past its deadline
		done := sendWithSlot(t, s, in, time.Second, time.Minute) // settled
		settle(t, s, done, StatusSent, &t0)
		got, err := s.PendingSends(context.Background(), t0.Add(30*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Scope != "p@example.com" || !got[0].Deadline.Equal(t0.Add(time.Minute)) {
			t.Fatalf("PendingSends = %+v, want the one in flight until t0+1m, scoped by its address", got)
		}
	})
}
