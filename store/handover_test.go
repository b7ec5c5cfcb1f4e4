package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"
	"time"
)

// inFlight is one of each send a dead server can leave in flight: direct
// or held, waiting for the provider or handed over.
type inFlight struct {
	directWaiting, heldWaiting, directHanded, heldHanded *Message
}

// leaveInFlight records the four sends of inFlight in inbox in, each
// reserved at t0 and due by t0+30s.
func leaveInFlight(t *testing.T, s *Store, in *Inbox) inFlight {
	t.Helper()
	ctx := context.Background()
	held := func() *Message {
		m := mustHoldVersion(t, s, in)
		slot := &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(30 * time.Second)}
		if err := s.ClaimHeld(ctx, m, slot); err != nil {
			t.Fatalf("ClaimHeld: %v", err)
		}
		return m
	}
	mark := func(m *Message, marks ...func(context.Context, string) error) *Message {
		for _, f := range marks {
			if err := f(ctx, m.ID); err != nil {
				t.Fatalf("mark %s: %v", m.ID, err)
			}
		}
		return m
	}
	return inFlight{
		directWaiting: mark(sendWithSlot(t, s, in, 0, 30*time.Second), s.MarkSendWaiting),
		heldWaiting:   mark(held(), s.MarkSendWaiting),
		directHanded:  mark(sendWithSlot(t, s, in, 0, 30*time.Second), s.MarkSendWaiting, s.MarkSendHandedOver),
		heldHanded:    mark(held(), s.MarkSendWaiting, s.MarkSendHandedOver),
	}
}

// mustHoldVersion stores a queued message as accepted held: version 1.
func mustHoldVersion(t *testing.T, s *Store, in *Inbox) *Message {
	t.Helper()
	m := &Message{InboxID: in.ID, Status: StatusQueued, MessageIDHeader: "<h@example.com>", Subject: "Held",
		FromAddress: in.EmailAddress, ToAddresses: StringList{"to@example.org"}, CreatedAt: t0, NextAttemptAt: &t0, Version: 1}
	th := &Thread{InboxID: in.ID, Subject: m.Subject, ParticipantHash: "h"}
	if err := s.CreateHeldMessage(context.Background(), m, nil, th, noJob); err != nil {
		t.Fatalf("CreateHeldMessage: %v", err)
	}
	return m
}

// TestRecoveryGivesBackWhatNeverWentOut: a send a dead server left
// waiting for the provider never went out. Its slot is deleted (it does
// not count), a held message is queued again (version + 1, due now) with
// its inbox's lane job in the same transaction, and a direct one fails as
// not sent. A send handed over counts at its deadline, delivery unknown,
// as before. The same for each of the three ways a dead server's sends
// are resolved.
func TestRecoveryGivesBackWhatNeverWentOut(t *testing.T) {
	t.Parallel()
	now := t0.Add(time.Minute) // after every deadline
	resolvers := []struct {
		name    string
		resolve func(s *Store, in *Inbox, lane LaneJob) (int64, error)
	}{
		{"ResolveExpiredSends", func(s *Store, _ *Inbox, lane LaneJob) (int64, error) {
			return s.ResolveExpiredSends(context.Background(), now, now, lane)
		}},
		{"ResolveInterrupted", func(s *Store, _ *Inbox, lane LaneJob) (int64, error) {
			return s.ResolveInterrupted(context.Background(), now, lane)
		}},
		{"RecoverSends", func(s *Store, in *Inbox, lane LaneJob) (int64, error) {
			return s.RecoverSends(context.Background(), RecoverScope{InboxID: in.ID}, now, now, lane)
		}},
	}
	forEachDriver(t, func(t *testing.T, s *Store) {
		for i, r := range resolvers {
			t.Run(r.name, func(t *testing.T) {
				ctx := context.Background()
				in := mustCreateInbox(t, s, fmt.Sprintf("r%d@example.com", i))
				f := leaveInFlight(t, s, in)
				claimed, err := s.Message(ctx, f.heldWaiting.ID)
				if err != nil {
					t.Fatal(err)
				}
				open := func() int64 {
					return countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE inbox_id = ? AND counted_at IS NULL", in.ID)
				}

				// A lane job that fails undoes it all: the transaction.
				boom := errors.New("boom")
				failing := func(string, time.Time) JobTx {
					return func(context.Context, *sql.Tx) error { return boom }
				}
				if _, err := r.resolve(s, in, failing); !errors.Is(err, boom) {
					t.Fatalf("with a failing lane job: got %v, want %v", err, boom)
				}
				if got := open(); got != 4 {
					t.Errorf("after a failed resolution: %d sends in flight, want 4", got)
				}
				for _, m := range []*Message{f.directWaiting, f.heldWaiting, f.directHanded, f.heldHanded} {
					if got, _ := s.Message(ctx, m.ID); got.Status != StatusSending {
						t.Errorf("after a failed resolution: message %s is %s, want still sending", m.ID, got.Status)
					}
				}

				var lanes []string
				lane := func(inboxID string, at time.Time) JobTx {
					return func(_ context.Context, tx *sql.Tx) error {
						if tx == nil {
							return errors.New("no transaction")
						}
						lanes = append(lanes, inboxID+" at "+at.UTC().String())
						return nil
					}
				}
				n, err := r.resolve(s, in, lane)
				if err != nil || n != 4 {
					t.Fatalf("got (%d, %v), want (4, nil)", n, err)
				}
				if want := []string{in.ID + " at " + now.String()}; !equalStrings(lanes, want) {
					t.Errorf("lane jobs: got %q, want %q", lanes, want)
				}
				if got := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE inbox_id = ?", in.ID); got != 2 {
					t.Errorf("slots: got %d, want 2 (the waiting ones deleted)", got)
				}
				if got := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE inbox_id = ? AND counted_at = ?",
					in.ID, t0.Add(30*time.Second)); got != 2 {
					t.Errorf("slots counted at their deadline: got %d, want 2 (the handed-over ones)", got)
				}

				m, _ := s.Message(ctx, f.heldWaiting.ID)
				if m.Status != StatusQueued || m.Version != claimed.Version+1 || m.NextAttemptAt == nil || !m.NextAttemptAt.Equal(now) || m.Error != nil {
					t.Errorf("held, waiting: got %s version %d next %v error %v, want queued, version %d, next %v",
						m.Status, m.Version, m.NextAttemptAt, m.Error, claimed.Version+1, now)
				}
				want := map[*Message]string{f.directWaiting: notSentError, f.directHanded: interruptedError, f.heldHanded: interruptedError}
				for msg, text := range want {
					m, _ := s.Message(ctx, msg.ID)
					if m.Status != StatusFailed || m.Error == nil || *m.Error != text {
						t.Errorf("message %s: got %s %v, want failed %q", msg.ID, m.Status, m.Error, text)
					}
				}
				if n, err := r.resolve(s, in, lane); err != nil || n != 0 {
					t.Errorf("again: got (%d, %v), want (0, nil)", n, err)
				}
			})
		}
	})
}

// TestRecoverSendsKeepsToItsScope: recovering one message's send touches
// no other, nor a send whose deadline is not yet before before.
func TestRecoverSendsKeepsToItsScope(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		f := leaveInFlight(t, s, in)
		lane := func(string, time.Time) JobTx { return noJob }
		if n, err := s.RecoverSends(ctx, RecoverScope{MessageID: f.heldWaiting.ID}, t0, t0.Add(30*time.Second), lane); err != nil || n != 0 {
			t.Errorf("before its deadline: got (%d, %v), want (0, nil)", n, err)
		}
		now := t0.Add(time.Minute)
		if n, err := s.RecoverSends(ctx, RecoverScope{MessageID: f.heldWaiting.ID}, now, now, lane); err != nil || n != 1 {
			t.Fatalf("got (%d, %v), want (1, nil)", n, err)
		}
		if m, _ := s.Message(ctx, f.heldWaiting.ID); m.Status != StatusQueued {
			t.Errorf("the message recovered is %s, want queued", m.Status)
		}
		for _, m := range []*Message{f.directWaiting, f.directHanded, f.heldHanded} {
			if got, _ := s.Message(ctx, m.ID); got.Status != StatusSending {
				t.Errorf("message %s out of scope is %s, want still sending", m.ID, got.Status)
			}
		}
		if got := countRows(t, s, "SELECT COUNT(*) FROM send_log WHERE counted_at IS NULL"); got != 3 {
			t.Errorf("%d sends in flight, want the 3 out of scope", got)
		}
	})
}
