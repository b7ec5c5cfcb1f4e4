package store

import (
	"context"
	"testing"
	"time"
)

// A logout is recorded once however often it is made, is seen by any
// Store on the database, and is pruned once its session has expired.
func TestAdminLogouts(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		now := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
		if err := s.CreateAdminLogout(ctx, "gone", now.Add(time.Hour)); err != nil {
			t.Fatalf("CreateAdminLogout: %v", err)
		}
		if err := s.CreateAdminLogout(ctx, "gone", now.Add(time.Hour)); err != nil {
			t.Fatalf("CreateAdminLogout again: %v, want nil (idempotent)", err)
		}
		if err := s.CreateAdminLogout(ctx, "old", now.Add(-time.Minute)); err != nil {
			t.Fatalf("CreateAdminLogout(old): %v", err)
		}
		for _, tt := range []struct {
			id   string
			want bool
		}{{"gone", true}, {"old", true}, {"still-in", false}} {
			if got, err := s.AdminLoggedOut(ctx, tt.id); err != nil || got != tt.want {
				t.Errorf("AdminLoggedOut(%q) = %v, %v; want %v, nil", tt.id, got, err, tt.want)
			}
		}

		n, err := s.PruneAdminLogouts(ctx, now)
		if err != nil || n != 1 {
			t.Fatalf("PruneAdminLogouts = %d, %v; want 1 (the expired one), nil", n, err)
		}
		if got, err := s.AdminLoggedOut(ctx, "old"); err != nil || got {
			t.Errorf("AdminLoggedOut(old) after prune = %v, %v; want false, nil", got, err)
		}
		if got, err := s.AdminLoggedOut(ctx, "gone"); err != nil || !got {
			t.Errorf("AdminLoggedOut(gone) after prune = %v, %v; want true, nil (not expired)", got, err)
		}
	})
}
