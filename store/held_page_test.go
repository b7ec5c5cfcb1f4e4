package store

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// HeldPage lists held mail by inbox, queued in lane order before
// scheduled by time, leaves out what is not held, and pages by
// LIMIT/OFFSET.
func TestHeldPage(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := mustCreateInbox(t, s, "a-held@example.com")
		b := mustCreateInbox(t, s, "b-held@example.com")
		if a.ID > b.ID {
			a, b = b, a
		}
		at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
		// Created out of order, so that the insertion order is not the answer.
		aSched2 := mustHold(t, s, a, StatusScheduled, at(20))
		aQueued2 := mustHold(t, s, a, StatusQueued, at(5))
		bQueued := mustHold(t, s, b, StatusQueued, at(1))
		aSched1 := mustHold(t, s, a, StatusScheduled, at(10))
		aQueued1 := mustHold(t, s, a, StatusQueued, at(2))
		sent := mustHold(t, s, a, StatusScheduled, at(0))
		if _, err := s.CancelHeld(ctx, sent.ID); err != nil {
			t.Fatal(err)
		}
		want := []*Message{aQueued1, aQueued2, aSched1, aSched2, bQueued}
		ids := func(ms []Message) string {
			var out []string
			for _, m := range ms {
				out = append(out, m.ID)
			}
			return fmt.Sprint(out)
		}
		wantIDs := func(ms []*Message) string {
			var out []string
			for _, m := range ms {
				out = append(out, m.ID)
			}
			return fmt.Sprint(out)
		}
		all, err := s.HeldPage(ctx, 200, 0)
		if err != nil {
			t.Fatal(err)
		}
		if ids(all) != wantIDs(want) {
			t.Fatalf("HeldPage = %s, want %s", ids(all), wantIDs(want))
		}
		first := all[0]
		if first.Subject != "Held" || len(first.ToAddresses) != 1 || first.NextAttemptAt == nil ||
			!first.NextAttemptAt.Equal(at(2)) || first.InboxID != a.ID {
			t.Errorf("first row = %+v, want its subject, recipients, inbox and next attempt", first)
		}
		if all[2].ScheduledAt == nil || !all[2].ScheduledAt.Equal(at(10)) {
			t.Errorf("a scheduled row's scheduled_at = %v, want %v", all[2].ScheduledAt, at(10))
		}
		for _, tt := range []struct{ limit, offset int }{{2, 0}, {2, 2}, {2, 4}, {2, 6}} {
			page, err := s.HeldPage(ctx, tt.limit, tt.offset)
			if err != nil {
				t.Fatal(err)
			}
			end := min(len(want), tt.offset+tt.limit)
			var w []*Message
			if tt.offset < len(want) {
				w = want[tt.offset:end]
			}
			if ids(page) != wantIDs(w) {
				t.Errorf("HeldPage(%d, %d) = %s, want %s", tt.limit, tt.offset, ids(page), wantIDs(w))
			}
		}
	})
}
