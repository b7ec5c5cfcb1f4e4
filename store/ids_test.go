package store

import (
	"context"
	"errors"
	"testing"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// A key that is not text (invalid UTF-8, a NUL, a UTF-8-encoded surrogate)
// names no row, on either database: PostgreSQL refused to compare one with
// a text column (a 500), where SQLite found nothing (a 404).
func TestKeysThatAreNotTextFindNothing(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		for _, id := range []string{"\xff", "a\x00b", "\xed\xa0\x80", "\xc0\x80"} {
			if _, err := s.Inbox(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Inbox(%q) = %v, want ErrNotFound", id, err)
			}
			name := "x"
			if _, err := s.UpdateInbox(ctx, id, InboxChanges{Name: &name}, t0); !errors.Is(err, ErrNotFound) {
				t.Errorf("UpdateInbox(%q) = %v, want ErrNotFound", id, err)
			}
			if err := s.DeleteInbox(ctx, id, clocktest.New(t0)); !errors.Is(err, ErrNotFound) {
				t.Errorf("DeleteInbox(%q) = %v, want ErrNotFound", id, err)
			}
			if _, err := s.Thread(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Thread(%q) = %v, want ErrNotFound", id, err)
			}
			if _, err := s.Message(ctx, id); !errors.Is(err, ErrNotFound) {
				t.Errorf("Message(%q) = %v, want ErrNotFound", id, err)
			}
			if ts, err := s.Threads(ctx, id, 10, 0); err != nil || len(ts) != 0 {
				t.Errorf("Threads(%q) = %d threads, %v; want none, nil", id, len(ts), err)
			}
			for _, f := range []MessageFilter{{InboxID: id}, {ThreadID: id}, {InboxID: "x", Query: id + "abc"}} {
				if ms, total, err := s.Messages(ctx, f); err != nil || len(ms) != 0 || total != 0 {
					t.Errorf("Messages(%+v) = %d, %d, %v; want none, 0, nil", f, len(ms), total, err)
				}
			}
		}
	})
}
