package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"
)

func TestCreateMessageNewThreadThenReply(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		first, th := mustSend(t, s, in, nil, t0, nil)
		if first.ThreadID != th.ID {
			t.Fatalf("got message thread %q, want the new thread %q", first.ThreadID, th.ID)
		}
		_, other := mustSend(t, s, in, nil, t0.Add(30*time.Second), nil)
		mustSend(t, s, in, th, t0.Add(time.Minute), nil)
		// Created earlier, stored later: must not move the thread back.
		mustSend(t, s, in, th, t0.Add(-time.Hour), nil)

		got, err := s.Thread(ctx, th.ID)
		if err != nil {
			t.Fatalf("Thread: %v", err)
		}
		if !got.LastMessageAt.Equal(t0.Add(time.Minute)) || got.MessageCount != 3 {
			t.Errorf("got thread last_message_at %s, count %d, want %s, 3", got.LastMessageAt, got.MessageCount, t0.Add(time.Minute))
		}

		ts, err := s.Threads(ctx, in.ID, 0, 0)
		if err != nil {
			t.Fatalf("Threads: %v", err)
		}
		if len(ts) != 2 || ts[0].ID != th.ID || ts[1].ID != other.ID || ts[0].MessageCount != 3 || ts[1].MessageCount != 1 {
			t.Errorf("got threads %+v, want %s (3 messages) then %s (1)", ts, th.ID, other.ID)
		}
		if page, _ := s.Threads(ctx, in.ID, 1, 1); len(page) != 1 || page[0].ID != other.ID {
			t.Errorf("got page %+v, want only %s", page, other.ID)
		}
		if none, err := s.Threads(ctx, "nonexistent-inbox-id", 10, 0); err != nil || none == nil || len(none) != 0 {
			t.Errorf("got Threads(unknown) = (%v, %v), want ([], nil)", none, err)
		}
		if _, err := s.Thread(ctx, "nonexistent-thread-id"); !errors.Is(err, ErrNotFound) {
			t.Errorf("got Thread(unknown) error %v, want ErrNotFound", err)
		}
	})
}

func TestCreateMessageIsOneTransaction(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		th := &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
		m := &Message{InboxID: in.ID, MessageIDHeader: "<x@example.com>", CreatedAt: t0}
		// The second attachment reuses the first one's id, so the last
		// insert fails after the thread and the message were written.
		atts := []Attachment{{ID: "dup", Filename: "a"}, {ID: "dup", Filename: "b"}}
		if err := s.CreateMessage(ctx, m, atts, th, nil); err == nil {
			t.Fatal("got nil error, want the duplicate attachment to fail")
		}
		if _, err := s.Thread(ctx, th.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("got Thread error %v, want ErrNotFound: the thread must be rolled back", err)
		}
		if _, err := s.Message(ctx, m.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("got Message error %v, want ErrNotFound: the message must be rolled back", err)
		}

		orphan := &Message{InboxID: in.ID, ThreadID: "nonexistent-thread-id", MessageIDHeader: "<y@example.com>", CreatedAt: t0}
		if err := s.CreateMessage(ctx, orphan, nil, nil, nil); !errors.Is(err, ErrNotFound) {
			t.Errorf("got CreateMessage into an unknown thread error %v, want ErrNotFound", err)
		}
	})
}

func TestMessageColumnsRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		replyTo := "<parent@example.org>"
		full, th := mustSend(t, s, in, nil, t0, func(m *Message) {
			m.InReplyTo = &replyTo
			m.References = StringList{"<root@example.org>", replyTo}
			m.CcAddresses = StringList{"cc@example.org"}
			m.BccAddresses = StringList{"bcc@example.org"}
			m.ReplyToAddresses = StringList{"reply@example.org"}
			m.Labels = StringList{"sent", "é"}
			m.Metadata = JSONObject{"n": json.Number("1.5"), "id": json.Number("12345678901234567890"),
				"nested": map[string]any{"k": "v"}, "list": []any{"x"}}
			m.Text, m.HTML, m.Size = "**hi**", "<p><strong>hi</strong></p>", 1234
			refusal, admission := `{"retry_after":3}`, `{"cost":2}`
			m.ThrottleRefusal, m.ThrottleAdmission, m.Attempts = &refusal, &admission, 2
		})
		bare, _ := mustSend(t, s, in, th, t0.Add(time.Second), func(m *Message) {
			m.ToAddresses, m.Metadata, m.SentAt, m.Status = nil, nil, nil, ""
		})

		got, err := s.Message(ctx, full.ID)
		if err != nil {
			t.Fatalf("Message: %v", err)
		}
		if !reflect.DeepEqual(got, full) {
			t.Errorf("got\n%+v\nwant\n%+v", got, full)
		}

		got, err = s.Message(ctx, bare.ID)
		if err != nil {
			t.Fatalf("Message: %v", err)
		}
		for name, l := range map[string]StringList{"to": got.ToAddresses, "references": got.References, "labels": got.Labels} {
			if l == nil || len(l) != 0 {
				t.Errorf("got %s %#v, want an empty non-nil list", name, l)
			}
		}
		if got.Metadata == nil || len(got.Metadata) != 0 {
			t.Errorf("got metadata %#v, want an empty non-nil object", got.Metadata)
		}
		if got.InReplyTo != nil || got.SentAt != nil || got.Error != nil || got.ProviderMessageID != nil {
			t.Errorf("got %+v, want nil optional fields", got)
		}
		if got.Status != StatusSending || got.Direction != DirectionOutbound {
			t.Errorf("got status %q direction %q, want the defaults %q %q", got.Status, got.Direction, StatusSending, DirectionOutbound)
		}
	})
}

func TestUpdateMessageOutcome(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		pid, reason, sentAt := "provider-1", "the provider refused: mailbox full", t0.Add(3*time.Second)

		tests := []struct {
			name string
			o    Outcome
		}{
			{"sent", Outcome{Status: StatusSent, ProviderMessageID: &pid, SentAt: &sentAt}},
			{"failed", Outcome{Status: StatusFailed, Error: &reason}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				m, _ := mustSend(t, s, in, nil, t0, func(m *Message) { m.Status, m.SentAt = StatusSending, nil })
				if err := s.UpdateMessageOutcome(ctx, m.ID, tt.o); err != nil {
					t.Fatalf("UpdateMessageOutcome: %v", err)
				}
				got, err := s.Message(ctx, m.ID)
				if err != nil {
					t.Fatalf("Message: %v", err)
				}
				gotO := Outcome{Status: got.Status, ProviderMessageID: got.ProviderMessageID, Error: got.Error, SentAt: got.SentAt}
				if !reflect.DeepEqual(gotO, tt.o) {
					t.Errorf("got %s, want %s", fmtOutcome(gotO), fmtOutcome(tt.o))
				}
			})
		}

		// The admission and the attempts: the decision written, the
		// attempts added to those of earlier dispatches.
		held, _ := mustSend(t, s, in, nil, t0, func(m *Message) { m.Status, m.SentAt, m.Attempts = StatusSending, nil, 2 })
		decision := `{"cost":1,"windows":[]}`
		if err := s.UpdateMessageOutcome(ctx, held.ID, Outcome{Status: StatusSent, SentAt: &sentAt, Admission: &decision, Attempts: 3}); err != nil {
			t.Fatalf("UpdateMessageOutcome: %v", err)
		}
		if got, err := s.Message(ctx, held.ID); err != nil || got.Attempts != 5 || got.ThrottleAdmission == nil || *got.ThrottleAdmission != decision {
			t.Errorf("got %+v (%v), want attempts 5 and the admission %s", got, err, decision)
		}

		if err := s.UpdateMessageOutcome(ctx, "nonexistent-message-id", Outcome{Status: StatusSent}); !errors.Is(err, ErrNotFound) {
			t.Errorf("got error %v for an unknown message, want ErrNotFound", err)
		}
		m, _ := mustSend(t, s, in, nil, t0, nil)
		if err := s.UpdateMessageOutcome(ctx, m.ID, Outcome{Status: "bounced"}); err == nil {
			t.Error("got nil error for an unknown status, want one")
		}
	})
}

func fmtOutcome(o Outcome) string {
	str := func(p *string) string {
		if p == nil {
			return "nil"
		}
		return *p
	}
	at := "nil"
	if o.SentAt != nil {
		at = o.SentAt.String()
	}
	return fmt.Sprintf("{%s provider=%s error=%s sent_at=%s}", o.Status, str(o.ProviderMessageID), str(o.Error), at)
}

func TestThreadMessagesAndLastMessage(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		m1, th := mustSend(t, s, in, nil, t0, nil)
		m3, _ := mustSend(t, s, in, th, t0.Add(2*time.Minute), nil)
		m2, _ := mustSend(t, s, in, th, t0.Add(time.Minute), nil)
		mustSend(t, s, in, nil, t0.Add(time.Hour), nil) // another thread

		ms, err := s.ThreadMessages(ctx, th.ID)
		if err != nil {
			t.Fatalf("ThreadMessages: %v", err)
		}
		if got, want := ids(ms), []string{m1.ID, m2.ID, m3.ID}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("got thread messages %v, want oldest first %v", got, want)
		}
		last, err := s.LastMessage(ctx, th.ID)
		if err != nil || last.ID != m3.ID {
			t.Errorf("got LastMessage (%v, %v), want %s", last, err, m3.ID)
		}
		if _, err := s.LastMessage(ctx, "nonexistent-thread-id"); !errors.Is(err, ErrNotFound) {
			t.Errorf("got LastMessage(unknown) error %v, want ErrNotFound", err)
		}
		if ms, err := s.ThreadMessages(ctx, "nonexistent-thread-id"); err != nil || ms == nil || len(ms) != 0 {
			t.Errorf("got ThreadMessages(unknown) = (%v, %v), want ([], nil)", ms, err)
		}
	})
}

func TestConcurrentCreateMessage(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		_, shared := mustSend(t, s, in, nil, t0, nil)

		// Half start threads of their own, half reply in one shared thread,
		// so writers contend both for the table and for one thread row.
		const n = 100
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				m := &Message{InboxID: in.ID, MessageIDHeader: fmt.Sprintf("<%d@example.com>", i), CreatedAt: t0.Add(time.Duration(i+1) * time.Second)}
				var th *Thread
				if i%2 == 0 {
					th = &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
				} else {
					m.ThreadID = shared.ID
				}
				atts := []Attachment{{Filename: "f.txt", ContentType: "text/plain", Disposition: "attachment", Size: 1}}
				errs[i] = s.CreateMessage(ctx, m, atts, th, nil)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("CreateMessage #%d: %v", i, err)
			}
		}
		if got := countRows(t, s, "SELECT COUNT(*) FROM messages"); got != n+1 {
			t.Errorf("got %d messages, want %d", got, n+1)
		}
		got, err := s.Thread(ctx, shared.ID)
		if err != nil {
			t.Fatalf("Thread: %v", err)
		}
		if want := t0.Add(n * time.Second); got.MessageCount != n/2+1 || !got.LastMessageAt.Equal(want) {
			t.Errorf("got shared thread count %d last %s, want %d and %s", got.MessageCount, got.LastMessageAt, n/2+1, want)
		}
	})
}

func ids(ms []Message) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}
