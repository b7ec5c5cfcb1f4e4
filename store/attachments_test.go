package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"reflect"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// attachmentRow is an attachment with content, as the send pipeline
// builds it.
func attachmentRow(name string, content []byte) Attachment {
	sum := sha256.Sum256(content)
	h := hex.EncodeToString(sum[:])
	return Attachment{Filename: name, ContentType: "application/octet-stream", Disposition: "attachment",
		Size: len(content), ContentHash: &h, Content: content}
}

// sendWith stores a message at the given time with attachments, in a new
// thread when th is nil (returned), else in th.
func sendWith(t *testing.T, s *Store, in *Inbox, th *Thread, at time.Time, atts ...Attachment) (*Message, *Thread, []Attachment) {
	t.Helper()
	m := &Message{InboxID: in.ID, MessageIDHeader: "<" + at.Format("150405") + "@example.com>", CreatedAt: at}
	var newThread *Thread
	if th == nil {
		newThread = &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
		th = newThread
	} else {
		m.ThreadID = th.ID
	}
	if err := s.CreateMessage(context.Background(), m, atts, newThread, nil); err != nil {
		t.Fatalf("CreateMessage: %v", err)
	}
	return m, th, atts
}

// description is what Attachment and Attachments return of a row: all
// but the content.
func description(a Attachment) Attachment {
	a.Content = nil
	return a
}

func names(atts []Attachment) []string {
	out := make([]string, len(atts))
	for i, a := range atts {
		out[i] = a.Filename
	}
	return out
}

func TestAttachmentsListedByMessageThreadAndInbox(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		other := mustCreateInbox(t, s, "b@example.com")
		// Every byte value, so that no dialect's text handling can hide.
		all := make([]byte, 256)
		for i := range all {
			all[i] = byte(i)
		}
		m1, th, atts1 := sendWith(t, s, in, nil, t0, attachmentRow("m1-a", all),
			attachmentRow("m1-b", []byte("b")), attachmentRow("m1-c", []byte{0}))
		m2, _, _ := sendWith(t, s, in, th, t0.Add(time.Minute), attachmentRow("m2-a", []byte("x")))
		sendWith(t, s, in, nil, t0.Add(2*time.Minute), attachmentRow("m3-a", []byte("y")))
		sendWith(t, s, in, th, t0.Add(3*time.Minute)) // none
		sendWith(t, s, other, nil, t0.Add(4*time.Minute), attachmentRow("other", []byte("z")))

		tests := []struct {
			name string
			f    AttachmentFilter
			want []string
		}{
			{"message, in the order sent", AttachmentFilter{MessageID: m1.ID}, []string{"m1-a", "m1-b", "m1-c"}},
			{"thread, oldest first", AttachmentFilter{ThreadID: th.ID}, []string{"m1-a", "m1-b", "m1-c", "m2-a"}},
			{"inbox, newest message first", AttachmentFilter{InboxID: in.ID}, []string{"m3-a", "m2-a", "m1-a", "m1-b", "m1-c"}},
			{"a page", AttachmentFilter{InboxID: in.ID, Limit: 2, Offset: 1}, []string{"m2-a", "m1-a"}},
			{"message without attachments", AttachmentFilter{MessageID: m2.ID + "x"}, []string{}},
			{"unknown inbox", AttachmentFilter{InboxID: "nonexistent-inbox-id"}, []string{}},
			{"not UTF-8", AttachmentFilter{ThreadID: "\xff\xfe"}, []string{}},
		}
		for _, tt := range tests {
			got, err := s.Attachments(ctx, tt.f)
			if err != nil {
				t.Fatalf("%s: Attachments: %v", tt.name, err)
			}
			if !reflect.DeepEqual(names(got), tt.want) {
				t.Errorf("%s: got %v, want %v", tt.name, names(got), tt.want)
			}
			for _, a := range got {
				if a.Content != nil {
					t.Errorf("%s: %s came with its content; a listing must not read it", tt.name, a.Filename)
				}
			}
		}

		got, err := s.Attachments(ctx, AttachmentFilter{MessageID: m1.ID})
		if err != nil {
			t.Fatal(err)
		}
		for i, a := range atts1 {
			if a.InboxID != in.ID || a.ThreadID != th.ID || a.MessageID != m1.ID || a.Position != i {
				t.Errorf("CreateMessage left %s with inbox %q thread %q message %q position %d, want %s %s %s %d",
					a.Filename, a.InboxID, a.ThreadID, a.MessageID, a.Position, in.ID, th.ID, m1.ID, i)
			}
			if !reflect.DeepEqual(got[i], description(a)) {
				t.Errorf("listed\n%+v\nwant\n%+v", got[i], description(a))
			}
		}
	})
}

func TestAttachmentAndContentRoundTrip(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		big := bytes.Repeat([]byte{0xff, 0x00, 'a', '\n'}, 1<<20) // 4 MiB
		cid := "logo@acme"
		inline := attachmentRow("logo.png", []byte("\x89PNG\r\n\x1a\n"))
		inline.ContentType, inline.Disposition, inline.ContentID = "image/png", "inline", &cid
		old := Attachment{Filename: "before-0009.txt", ContentType: "text/plain", Disposition: "attachment", Size: 3}
		_, _, atts := sendWith(t, s, in, nil, t0, attachmentRow("big.bin", big), inline, old)

		for _, a := range atts {
			got, err := s.Attachment(ctx, a.ID)
			if err != nil {
				t.Fatalf("Attachment(%s): %v", a.Filename, err)
			}
			if !reflect.DeepEqual(*got, description(a)) {
				t.Errorf("got\n%+v\nwant\n%+v", *got, description(a))
			}
		}
		for _, a := range atts[:2] {
			content, err := s.AttachmentContent(ctx, a.ID)
			if err != nil {
				t.Fatalf("AttachmentContent(%s): %v", a.Filename, err)
			}
			if !bytes.Equal(content, a.Content) {
				t.Errorf("%s: got %d bytes back, want the %d sent, identical", a.Filename, len(content), len(a.Content))
			}
		}
		// A row without content (sent before 0009) has a description only.
		if _, err := s.AttachmentContent(ctx, atts[2].ID); !errors.Is(err, ErrNotFound) {
			t.Errorf("content of an attachment kept without it: got %v, want ErrNotFound", err)
		}
		for _, id := range []string{"nonexistent-attachment-id", "6f1c2a9e-3b7d-4c55-9a0e-2d8f4b1c7e90"} {
			if _, err := s.Attachment(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Attachment(%q): got %v, want ErrNotFound", id, err)
			}
			if _, err := s.AttachmentContent(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("AttachmentContent(%q): got %v, want ErrNotFound", id, err)
			}
		}
	})
}

// Deleting an inbox, a thread or a message deletes its attachments,
// content and all.
func TestAttachmentsGoWithTheirMessage(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "a@example.com")
		keep := mustCreateInbox(t, s, "b@example.com")
		m1, th, _ := sendWith(t, s, in, nil, t0, attachmentRow("a", []byte("a")), attachmentRow("b", []byte("b")))
		sendWith(t, s, in, th, t0.Add(time.Second), attachmentRow("c", []byte("c")))
		sendWith(t, s, in, nil, t0.Add(2*time.Second), attachmentRow("d", []byte("d")))
		sendWith(t, s, keep, nil, t0, attachmentRow("kept", []byte("k")))
		count := func() int64 { return countRows(t, s, "SELECT COUNT(*) FROM attachments") }

		if err := s.db.Exec("DELETE FROM messages WHERE id = ?", m1.ID).Error; err != nil {
			t.Fatal(err)
		}
		if got := count(); got != 3 {
			t.Errorf("after deleting a message: %d attachments, want 3", got)
		}
		if err := s.db.Exec("DELETE FROM threads WHERE id = ?", th.ID).Error; err != nil {
			t.Fatal(err)
		}
		if got := count(); got != 2 {
			t.Errorf("after deleting a thread: %d attachments, want 2", got)
		}
		if err := s.DeleteInbox(ctx, in.ID, clocktest.New(t0)); err != nil {
			t.Fatal(err)
		}
		left, err := s.Attachments(ctx, AttachmentFilter{InboxID: keep.ID})
		if got := count(); err != nil || got != 1 || len(left) != 1 || left[0].Filename != "kept" {
			t.Errorf("after deleting the inbox: %d attachments (%v, %v), want only the other inbox's", got, names(left), err)
		}
	})
}

// Ids come from URLs, where any byte can be written; PostgreSQL refuses
// text that is not UTF-8. Such an id names nothing, on both databases.
func TestIdsThatAreNotUTF8AreNotFound(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, id := range []string{"\xff", "a\x80b", "\xed\xa0\x80"} {
			if _, err := s.Message(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Message(%q): got %v, want ErrNotFound", id, err)
			}
			if _, err := s.Attachment(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Attachment(%q): got %v, want ErrNotFound", id, err)
			}
			if _, err := s.AttachmentContent(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("AttachmentContent(%q): got %v, want ErrNotFound", id, err)
			}
			if atts, err := s.Attachments(ctx, AttachmentFilter{InboxID: id}); err != nil || len(atts) != 0 {
				t.Errorf("Attachments(inbox %q): got (%v, %v), want none", id, atts, err)
			}
		}
	})
}

// liveHeap is the Go heap still reachable after the collector ran twice
// (sync.Pool keeps what it holds for one collection more).
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// Writing and reading a 16 MiB attachment leaves nothing of it in memory:
// on PostgreSQL pgx would keep the encoded content on the connection that
// wrote it, and its read buffer on the one that read it, for as long as
// they idle in the pool.
//
// Not parallel (nor its subtests): it measures the process's live heap.
func TestAttachmentContentIsNotHeldByIdleConnections(t *testing.T) {
	for _, driver := range []string{DriverPostgres, DriverSQLite} {
		t.Run(driver, func(t *testing.T) { attachmentContentNotHeld(t, migratedStore(t, driver)) })
	}
}

func attachmentContentNotHeld(t *testing.T, s *Store) {
	ctx := context.Background()
	in := mustCreateInbox(t, s, "a@example.com")
	const size = 16 << 20
	base := liveHeap()
	var id string
	func() {
		m := &Message{InboxID: in.ID, MessageIDHeader: "<x@example.com>", CreatedAt: t0}
		th := &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
		atts := []Attachment{attachmentRow("big.bin", make([]byte, size))}
		if err := s.CreateMessage(ctx, m, atts, th, nil); err != nil {
			t.Fatal(err)
		}
		id = atts[0].ID
	}()
	if grown := liveHeap() - base; grown > size/4 {
		t.Errorf("after writing a %d MiB attachment the live heap grew by %d MiB, want it given back", size>>20, grown>>20)
	}
	func() {
		content, err := s.AttachmentContent(ctx, id)
		if err != nil || len(content) != size {
			t.Fatalf("AttachmentContent: %d bytes, %v", len(content), err)
		}
	}()
	if grown := liveHeap() - base; grown > size/4 {
		t.Errorf("after reading a %d MiB attachment the live heap grew by %d MiB, want it given back", size>>20, grown>>20)
	}
}
