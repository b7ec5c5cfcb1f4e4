package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The identity keeps every limit servers sharing a backend must agree on,
// the second and the day (migration 0016) with the minute and the hour,
// and each change moves its version.
func TestThrottleIdentityLimits(t *testing.T) {
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		if _, err := s.ThrottleIdentity(ctx); !errors.Is(err, ErrNotFound) {
			t.Fatalf("ThrottleIdentity before any = %v, want ErrNotFound", err)
		}
		want := ThrottleIdentity{Backend: "postgres", GlobalPerSecond: 5, GlobalPerMinute: 60, GlobalPerHour: 600,
			GlobalPerDay: 5000, InboxPerMinute: 10, InboxPerHour: 100, InboxPerDay: 300,
			ChangedAt: time.Unix(1_700_000_000, 0), ChangedBy: "test"}
		for i, change := range []func(*ThrottleIdentity){
			func(*ThrottleIdentity) {},
			func(id *ThrottleIdentity) { id.GlobalPerSecond, id.GlobalPerDay, id.InboxPerDay = 7, 0, 20 },
		} {
			change(&want)
			got, err := s.SetThrottleIdentity(ctx, want)
			if err != nil {
				t.Fatal(err)
			}
			if got.GlobalPerSecond != want.GlobalPerSecond || got.GlobalPerMinute != want.GlobalPerMinute ||
				got.GlobalPerHour != want.GlobalPerHour || got.GlobalPerDay != want.GlobalPerDay ||
				got.InboxPerMinute != want.InboxPerMinute || got.InboxPerHour != want.InboxPerHour ||
				got.InboxPerDay != want.InboxPerDay || got.Version != int64(i+1) {
				t.Fatalf("recorded %+v, want the limits of %+v at version %d", got, want, i+1)
			}
		}
	})
}
