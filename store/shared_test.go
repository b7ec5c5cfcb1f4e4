package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// With the database shared, an inbox another server (another Store)
// changes or deletes is seen at once, on the very next read: no copy is
// kept in memory.
func TestShareDatabaseSeesOtherWriters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoServers(t)
	in := mustCreateInbox(t, a, "a@example.com")
	if _, err := b.Inbox(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	n := 3
	if _, err := a.UpdateInbox(ctx, in.ID, InboxChanges{SetPerMinute: true, PerMinute: &n}, time.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := b.Inbox(ctx, in.ID)
	if err != nil || got.RateLimitPerMinute == nil || *got.RateLimitPerMinute != 3 {
		t.Fatalf("the other server reads %+v, %v; want per-minute 3", got, err)
	}
	if err := a.DeleteInbox(ctx, in.ID, clocktest.New(t0)); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inbox(ctx, in.ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the other server reads a deleted inbox: %v", err)
	}
}

// A send judged by a copy of its inbox (InboxCopy) that another server has
// changed since is recorded not at all: the guard in the send's write
// finds the copy out of date (ErrInboxChanged), and the copy is then the
// inbox as it is; one judged by a copy of a deleted inbox finds it gone.
// Both ways a send is written: one statement (no attachments, a new thread
// or a reply) and a transaction (attachments).
func TestSendJudgedByAStaleCopyIsNotRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	a, b := twoServers(t)
	in := mustCreateInbox(t, a, "a@example.com")
	_, reply := mustSend(t, a, in, nil, t0, nil)
	atts := func() []Attachment {
		return []Attachment{{Filename: "a.txt", ContentType: "text/plain", Disposition: "attachment", Size: 1, Content: []byte("x")}}
	}
	for i, tc := range []struct {
		name  string
		atts  func() []Attachment
		reply bool
	}{{"one statement", func() []Attachment { return nil }, false}, {"one statement, a reply", func() []Attachment { return nil }, true},
		{"transaction", atts, false}} {
		t.Run(tc.name, func(t *testing.T) {
			send := func(judged *Inbox) error {
				m := &Message{InboxID: in.ID, Status: StatusSending, MessageIDHeader: fmt.Sprintf("<%s@example.com>", uuid.NewString()),
					FromAddress: in.EmailAddress, CreatedAt: t0}
				var th *Thread
				if tc.reply {
					m.ThreadID = reply.ID
				} else {
					th = &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
				}
				slot := &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute), JudgedBy: judged}
				return b.CreateMessage(ctx, m, tc.atts(), th, slot)
			}
			copy, err := b.InboxCopy(ctx, in.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := send(copy); err != nil {
				t.Fatalf("a send judged by a current copy: %v", err)
			}
			n := i + 3
			if _, err := a.UpdateInbox(ctx, in.ID, InboxChanges{SetPerMinute: true, PerMinute: &n}, time.Now()); err != nil {
				t.Fatal(err)
			}
			if stale, _ := b.InboxCopy(ctx, in.ID); !stale.SameAs(copy) {
				t.Fatalf("InboxCopy read the database: %+v", stale)
			}
			before := countRows(t, a, "SELECT COUNT(*) FROM messages") + countRows(t, a, "SELECT COUNT(*) FROM send_log") +
				countRows(t, a, "SELECT COUNT(*) FROM threads")
			if err := send(copy); !errors.Is(err, ErrInboxChanged) {
				t.Fatalf("a send judged by a stale copy: %v, want ErrInboxChanged", err)
			}
			after := countRows(t, a, "SELECT COUNT(*) FROM messages") + countRows(t, a, "SELECT COUNT(*) FROM send_log") +
				countRows(t, a, "SELECT COUNT(*) FROM threads")
			if after != before {
				t.Fatalf("the stale send wrote %d rows", after-before)
			}
			fresh, err := b.InboxCopy(ctx, in.ID)
			if err != nil || fresh.RateLimitPerMinute == nil || *fresh.RateLimitPerMinute != n {
				t.Fatalf("the copy after ErrInboxChanged: %+v, %v; want per-minute %d", fresh, err, n)
			}
			if err := send(fresh); err != nil {
				t.Fatalf("a send judged by the fresh copy: %v", err)
			}
		})
	}
	t.Run("deleted", func(t *testing.T) {
		copy, err := b.InboxCopy(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		// The sends above were never settled: past their deadline, as a
		// crashed server's, they do not hold the deletion.
		if err := a.DeleteInbox(ctx, in.ID, clocktest.New(t0.Add(time.Hour))); err != nil {
			t.Fatal(err)
		}
		m := &Message{InboxID: in.ID, MessageIDHeader: "<gone@example.com>", CreatedAt: t0}
		slot := &SendSlot{Scope: in.EmailAddress, ReservedAt: t0, Deadline: t0.Add(time.Minute), JudgedBy: copy}
		if err := b.CreateMessage(ctx, m, nil, &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}, slot); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a send judged by a copy of a deleted inbox: %v, want ErrNotFound", err)
		}
		if _, err := b.InboxCopy(ctx, in.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("the copy of a deleted inbox is kept: %v", err)
		}
	})
}

// twoServers opens two Stores on one new PostgreSQL database, as two
// servers do: a migrates it (finding it current), b shares it.
func twoServers(t *testing.T) (a, b *Store) {
	dsn := migratedDSN(t, DriverPostgres)
	open := func() *Store {
		s, err := Open(context.Background(), Options{Driver: DriverPostgres, DSN: dsn, MaxOpenConns: testPoolSize})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	a, b = open(), open()
	if err := a.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.ShareDatabase()
	return a, b
}
