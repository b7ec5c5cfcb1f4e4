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

func TestCreateInboxThenDuplicateConflicts(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "sales@example.com")
		if _, err := uuid.Parse(in.ID); err != nil {
			t.Errorf("got generated id %q, want a UUID: %v", in.ID, err)
		}
		got, err := s.Inbox(ctx, in.ID)
		if err != nil {
			t.Fatalf("Inbox: %v", err)
		}
		if got.EmailAddress != in.EmailAddress || got.Name != in.Name || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
			t.Errorf("got %+v, want %+v", got, in)
		}

		dup := newInbox("sales@example.com")
		if err := s.CreateInbox(ctx, dup); !errors.Is(err, ErrConflict) {
			t.Errorf("got duplicate CreateInbox error %v, want ErrConflict", err)
		}
		again := &Inbox{ID: in.ID, EmailAddress: "other@example.com", CreatedAt: t0}
		if err := s.CreateInbox(ctx, again); !errors.Is(err, ErrConflict) {
			t.Errorf("got duplicate-id CreateInbox error %v, want ErrConflict", err)
		}
	})
}

func TestUnknownInboxIsNotFound(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		mustCreateInbox(t, s, "a@example.com")
		for _, id := range []string{"nonexistent-inbox-id", uuid.NewString(), "", "'; DROP TABLE inboxes; --", "日本"} {
			t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
				if _, err := s.Inbox(context.Background(), id); !errors.Is(err, ErrNotFound) {
					t.Errorf("got Inbox error %v, want ErrNotFound", err)
				}
				if err := s.DeleteInbox(context.Background(), id, clocktest.New(t0)); !errors.Is(err, ErrNotFound) {
					t.Errorf("got DeleteInbox error %v, want ErrNotFound", err)
				}
			})
		}
	})
}

func TestInboxesOrderedByAddressAndPaged(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		for _, addr := range []string{"carol@example.com", "alice@example.com", "bob@example.com"} {
			mustCreateInbox(t, s, addr)
		}
		tests := []struct {
			limit, offset int
			want          []string
		}{
			{0, 0, []string{"alice@example.com", "bob@example.com", "carol@example.com"}},
			{2, 0, []string{"alice@example.com", "bob@example.com"}},
			{2, 2, []string{"carol@example.com"}},
			{10, 3, []string{}},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("limit=%d,offset=%d", tt.limit, tt.offset), func(t *testing.T) {
				ins, err := s.Inboxes(context.Background(), tt.limit, tt.offset)
				if err != nil {
					t.Fatalf("Inboxes: %v", err)
				}
				if ins == nil {
					t.Error("got nil slice, want an empty one")
				}
				got := []string{}
				for _, in := range ins {
					got = append(got, in.EmailAddress)
				}
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("got %v, want %v", got, tt.want)
				}
			})
		}
	})
}

func TestDeleteInboxCascades(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		gone := mustCreateInbox(t, s, "gone@example.com")
		kept := mustCreateInbox(t, s, "kept@example.com")

		m := &Message{InboxID: gone.ID, MessageIDHeader: "<1@example.com>", CreatedAt: t0}
		th := &Thread{InboxID: gone.ID, Subject: "s", ParticipantHash: "h"}
		atts := []Attachment{{Filename: "a.txt", ContentType: "text/plain", Disposition: "attachment", Size: 3}}
		if err := s.CreateMessage(ctx, m, atts, th, nil); err != nil {
			t.Fatalf("CreateMessage: %v", err)
		}
		keptMsg, keptThread := mustSend(t, s, kept, nil, t0, nil)

		if err := s.DeleteInbox(ctx, gone.ID, clocktest.New(t0)); err != nil {
			t.Fatalf("DeleteInbox: %v", err)
		}
		if _, err := s.Inbox(ctx, gone.ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("got Inbox error %v after delete, want ErrNotFound", err)
		}
		if err := s.DeleteInbox(ctx, gone.ID, clocktest.New(t0)); !errors.Is(err, ErrNotFound) {
			t.Errorf("got second DeleteInbox error %v, want ErrNotFound", err)
		}
		for _, table := range []string{"threads", "messages", "attachments"} {
			if n := countRows(t, s, "SELECT COUNT(*) FROM "+table+" WHERE id IN (?, ?, ?)", th.ID, m.ID, atts[0].ID); n != 0 {
				t.Errorf("got %d rows of the deleted inbox left in %s, want 0", n, table)
			}
		}
		if _, err := s.Thread(ctx, keptThread.ID); err != nil {
			t.Errorf("Thread of the other inbox: %v", err)
		}
		if _, err := s.Message(ctx, keptMsg.ID); err != nil {
			t.Errorf("Message of the other inbox: %v", err)
		}
	})
}

func TestTimesComeBackUTCToTheMicrosecond(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		// Nanoseconds, a zone far from UTC, and a monotonic reading: all must
		// be dropped on the way in, none may shift the instant.
		zone := time.FixedZone("UTC+5:30", 5*3600+1800)
		written := time.Date(2025, 6, 30, 23, 59, 59, 123456789, zone)
		want := written.Truncate(time.Microsecond)

		in := &Inbox{EmailAddress: "tz@example.com", CreatedAt: written, UpdatedAt: written.Add(time.Hour)}
		if err := s.CreateInbox(ctx, in); err != nil {
			t.Fatalf("CreateInbox: %v", err)
		}
		m, th := mustSend(t, s, in, nil, written, nil)

		gotIn, err := s.Inbox(ctx, in.ID)
		if err != nil {
			t.Fatalf("Inbox: %v", err)
		}
		gotMsg, err := s.Message(ctx, m.ID)
		if err != nil {
			t.Fatalf("Message: %v", err)
		}
		gotTh, err := s.Thread(ctx, th.ID)
		if err != nil {
			t.Fatalf("Thread: %v", err)
		}
		tests := []struct {
			name      string
			got, want time.Time
			stored    time.Time // what the caller's struct holds after the write
		}{
			{"inbox created_at", gotIn.CreatedAt, want, in.CreatedAt},
			{"inbox updated_at", gotIn.UpdatedAt, want.Add(time.Hour), in.UpdatedAt},
			{"message created_at", gotMsg.CreatedAt, want, m.CreatedAt},
			{"message sent_at", *gotMsg.SentAt, want, *m.SentAt},
			{"thread last_message_at", gotTh.LastMessageAt, want, th.LastMessageAt},
			{"thread created_at", gotTh.CreatedAt, want, th.CreatedAt},
		}
		for _, tt := range tests {
			if !tt.got.Equal(tt.want) || tt.got.Location() != time.UTC {
				t.Errorf("%s: got %s (%v), want %s in UTC", tt.name, tt.got, tt.got.Location(), tt.want.UTC())
			}
			if !tt.stored.Equal(tt.got) || tt.stored.Location() != time.UTC {
				t.Errorf("%s: the written struct holds %s, want what was stored, %s", tt.name, tt.stored, tt.got)
			}
		}
	})
}

func TestInboxCacheNeverOutlivesDelete(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "cached@example.com")
		for i := 0; i < 2; i++ { // the second read comes from the cache
			if got, err := s.Inbox(ctx, in.ID); err != nil || got.EmailAddress != in.EmailAddress {
				t.Fatalf("Inbox = %+v, %v; want %s", got, err, in.EmailAddress)
			}
		}
		if err := s.DeleteInbox(ctx, in.ID, clocktest.New(t0)); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Inbox(ctx, in.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Inbox after delete = %v, want ErrNotFound", err)
		}
	})
}

func TestInboxCacheIgnoresReadsThatRacedADelete(t *testing.T) {
	t.Parallel()
	var c inboxCache
	_, gen, _ := c.get("a")    // a reader misses and goes to the database...
	c.evict("a")               // ...while the inbox is deleted...
	c.put(Inbox{ID: "a"}, gen) // ...then it tries to cache what it read
	if _, _, ok := c.get("a"); ok {
		t.Fatal("a read that raced a delete was cached")
	}
	_, gen, _ = c.get("b")
	c.put(Inbox{ID: "b"}, gen)
	if _, _, ok := c.get("b"); !ok {
		t.Fatal("an undisturbed read was not cached")
	}
}

// BusiestInboxes ranks inboxes by their sends in the throttle's log since
// a moment, in flight ones included, and leaves out the idle and the old.
func TestBusiestInboxes(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		ins := map[string]*Inbox{}
		for _, addr := range []string{"a@example.com", "b@example.com", "c@example.com", "idle@example.com"} {
			in := newInbox(addr)
			if err := s.CreateInbox(ctx, in); err != nil {
				t.Fatal(err)
			}
			ins[addr] = in
		}
		at := t0.Add(time.Minute)
		old := sendWithSlot(t, s, ins["c@example.com"], 0, 30*time.Second) // counted before the minute
		settle(t, s, old, StatusSent, &t0)
		for range 3 {
			m := sendWithSlot(t, s, ins["b@example.com"], time.Minute, 30*time.Second)
			settle(t, s, m, StatusSent, &at)
		}
		sendWithSlot(t, s, ins["a@example.com"], time.Minute, 30*time.Second) // in flight
		m := sendWithSlot(t, s, ins["a@example.com"], time.Minute, 30*time.Second)
		settle(t, s, m, StatusSent, &at)
		got, err := s.BusiestInboxes(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, in := range got {
			addrs = append(addrs, in.EmailAddress)
		}
		if fmt.Sprint(addrs) != "[b@example.com a@example.com]" {
			t.Fatalf("BusiestInboxes = %v, want b (3) then a (2, one in flight); c's send is older, idle has none", addrs)
		}
		if got, _ := s.BusiestInboxes(ctx, at, 1); len(got) != 1 || got[0].EmailAddress != "b@example.com" {
			t.Fatalf("BusiestInboxes(limit 1) = %v", got)
		}
	})
}
