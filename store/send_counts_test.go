package store

import (
	"context"
	"testing"
	"time"
)

// Counts add up per minute and per hour, from several flushes (servers)
// at once, and read back in order; a prune takes only what is older.
func TestSendCountsAddUp(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		m0 := t0.Truncate(time.Hour).Add(58 * time.Minute)
		m1 := m0.Add(time.Minute)     // the same hour
		m2 := m0.Add(2 * time.Minute) // the next hour
		done := make(chan error, 4)
		for range 4 {
			go func() {
				done <- s.AddSendCounts(ctx, []Tally{{m0, "sent", 2}, {m1, "sent", 1}, {m1, "failed", 1},
					{m2.Add(30 * time.Second), "sent", 5}, {m2, "throttled", 0}})
			}()
		}
		for range 4 {
			if err := <-done; err != nil {
				t.Fatalf("AddSendCounts: %v", err)
			}
		}
		minutes, err := s.SendCounts(ctx, WidthMinute, m0, m2.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		want := []SendCount{{WidthMinute, m0, "sent", 8}, {WidthMinute, m1, "failed", 4}, {WidthMinute, m1, "sent", 4},
			{WidthMinute, m2, "sent", 20}}
		if !sameCounts(minutes, want) {
			t.Errorf("minutes: got %+v, want %+v", minutes, want)
		}
		hours, err := s.SendCounts(ctx, WidthHour, m0.Truncate(time.Hour), m2.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		want = []SendCount{{WidthHour, m0.Truncate(time.Hour), "failed", 4}, {WidthHour, m0.Truncate(time.Hour), "sent", 12},
			{WidthHour, m2, "sent", 20}}
		if !sameCounts(hours, want) {
			t.Errorf("hours: got %+v, want %+v", hours, want)
		}
		if n, err := s.PruneSendCounts(ctx, WidthMinute, m1); err != nil || n != 1 {
			t.Errorf("PruneSendCounts = %d, %v; want the one row of m0", n, err)
		}
		if left, _ := s.SendCounts(ctx, WidthHour, m0.Truncate(time.Hour), m2.Add(time.Hour)); len(left) != 3 {
			t.Errorf("a prune of minutes took hours: %d left", len(left))
		}
	})
}

func sameCounts(got, want []SendCount) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].Width != want[i].Width || !got[i].Start.Equal(want[i].Start) || got[i].Kind != want[i].Kind || got[i].Count != want[i].Count {
			return false
		}
	}
	return true
}
