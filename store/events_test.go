package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// Events are stored once per provider and event key; the suppression a
// new one adds is added once, keeps its first reason, and is not put back
// by the same event replayed after the address was removed.
func TestRecordEventsOnceAndSuppressions(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "agent@acme.test")
		m, _ := mustSend(t, s, in, nil, t0, func(m *Message) { pid := "<p1@acme.test>"; m.ProviderMessageID = &pid })
		ids, err := s.MessagesByProviderID(ctx, []string{"<p1@acme.test>", "<nobody@acme.test>"})
		if err != nil || len(ids) != 1 || ids["<p1@acme.test>"] != m.ID {
			t.Fatalf("MessagesByProviderID = %v, %v", ids, err)
		}
		hard := "hard"
		bounce := func(key string) EventRecord {
			return EventRecord{
				Event:    DeliveryEvent{MessageID: m.ID, Provider: "mailgun", EventKey: key, Type: "bounced", BounceType: &hard, Recipient: "to@example.org", OccurredAt: t0.Add(time.Second), CreatedAt: t0},
				Suppress: &Suppression{Email: "to@example.org", Reason: ReasonBounce, Source: "mailgun", MessageID: &m.ID, CreatedAt: t0},
			}
		}
		recs := []EventRecord{bounce("ev-1"), bounce("ev-1"), {
			Event:    DeliveryEvent{MessageID: m.ID, Provider: "mailgun", EventKey: "ev-2", Type: "complained", Recipient: "to@example.org", OccurredAt: t0.Add(2 * time.Second), CreatedAt: t0},
			Suppress: &Suppression{Email: "to@example.org", Reason: ReasonComplaint, Source: "mailgun", CreatedAt: t0},
		}}
		n, err := s.RecordEvents(ctx, recs)
		if err != nil || n != 2 {
			t.Fatalf("RecordEvents = %d, %v; want 2 new (ev-1 twice in one batch is one)", n, err)
		}
		if !recs[0].Stored || !recs[0].Suppressed || recs[1].Stored || !recs[2].Stored || recs[2].Suppressed {
			t.Errorf("marks = %+v %+v %+v", recs[0], recs[1], recs[2])
		}
		sup, err := s.Suppressed(ctx, []string{"to@example.org", "other@example.org"})
		if err != nil || len(sup) != 1 || sup[0].Reason != ReasonBounce || sup[0].MessageID == nil || *sup[0].MessageID != m.ID {
			t.Fatalf("Suppressed = %+v, %v; want the first reason, bounce", sup, err)
		}
		evs, err := s.MessageEvents(ctx, m.ID)
		if err != nil || len(evs) != 2 || evs[0].EventKey != "ev-1" || evs[1].Type != "complained" || evs[0].BounceType == nil {
			t.Fatalf("MessageEvents = %+v, %v", evs, err)
		}

		if err := s.DeleteSuppression(ctx, "to@example.org"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSuppression(ctx, "to@example.org"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second delete = %v, want ErrNotFound", err)
		}
		if n, err := s.RecordEvents(ctx, []EventRecord{bounce("ev-1")}); err != nil || n != 0 {
			t.Fatalf("replayed bounce = %d, %v", n, err)
		}
		if sup, _ := s.Suppressed(ctx, []string{"to@example.org"}); len(sup) != 0 {
			t.Errorf("a replayed bounce put the address back: %+v", sup)
		}

		// Added by hand: 201's row, then the row that is there.
		sp, added, err := s.AddSuppression(ctx, &Suppression{Email: "a@x.test", Reason: ReasonManual, Source: "api", CreatedAt: t0})
		if err != nil || !added || sp.Email != "a@x.test" {
			t.Fatalf("AddSuppression = %+v %v %v", sp, added, err)
		}
		sp, added, err = s.AddSuppression(ctx, &Suppression{Email: "a@x.test", Reason: ReasonManual, Source: "api", CreatedAt: t0.Add(time.Hour)})
		if err != nil || added || !sp.CreatedAt.Equal(t0) {
			t.Fatalf("AddSuppression again = %+v %v %v, want the first row", sp, added, err)
		}
		for i, e := range []string{"b@x.test", "c@x.test"} {
			if _, _, err := s.AddSuppression(ctx, &Suppression{Email: e, Reason: ReasonBounce, Source: "ses", CreatedAt: t0.Add(time.Duration(i+1) * time.Minute)}); err != nil {
				t.Fatal(err)
			}
		}
		page, total, err := s.Suppressions(ctx, SuppressionFilter{Reason: ReasonBounce, Limit: 1})
		if err != nil || total != 2 || len(page) != 1 || page[0].Email != "c@x.test" {
			t.Errorf("page of bounces = %+v, %d, %v; want c (newest) of 2", page, total, err)
		}
		page, total, err = s.Suppressions(ctx, SuppressionFilter{Email: "a@x.test", Limit: 10})
		if err != nil || total != 1 || len(page) != 1 {
			t.Errorf("by email = %+v, %d, %v", page, total, err)
		}

		// The events go with their message's inbox.
		if err := s.DeleteInbox(ctx, in.ID, clocktest.New(t0)); err != nil {
			t.Fatal(err)
		}
		if n := countRows(t, s, "SELECT COUNT(*) FROM delivery_events"); n != 0 {
			t.Errorf("%d events left after their inbox was deleted", n)
		}
	})
}

// A server key is made once and is the same for every caller.
func TestServerKeyForIsShared(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a, err := s.ServerKeyFor(ctx, "verp")
		if err != nil || len(a) != 32 {
			t.Fatalf("ServerKeyFor = %x, %v", a, err)
		}
		b, err := s.ServerKeyFor(ctx, "verp")
		if err != nil || string(a) != string(b) {
			t.Errorf("second ServerKeyFor = %x, %v; want %x", b, err, a)
		}
		if c, _ := s.ServerKeyFor(ctx, "other"); string(c) == string(a) {
			t.Error("two names share a key")
		}
	})
}
