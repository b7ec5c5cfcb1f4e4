package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// The database writes an event in the transaction that changes what it
// tells of, only while an endpoint is enabled; a relay that fails leaves
// it for the next, and one that succeeds takes it once.
func TestOutboxWrittenByTheChangeAndRelayedOnce(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		in := mustCreateInbox(t, s, "agent@acme.test")
		count := func() int {
			var n int
			if err := s.sqlDB.QueryRowContext(ctx, "SELECT count(*) FROM webhook_outbox").Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}
		mustSend(t, s, in, nil, t0, nil)
		if n := count(); n != 0 {
			t.Fatalf("%d outbox events with no endpoint, want none", n)
		}
		ep := &WebhookEndpoint{URL: "https://example.com/hook", Events: StringList{"message.sent"}, Enabled: true, Secret: "whsec_x"}
		if err := s.CreateWebhookEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
		m, _ := mustSend(t, s, in, nil, t0, func(m *Message) { m.Status = StatusSending; m.SentAt = nil })
		if n := count(); n != 0 {
			t.Fatalf("%d outbox events for a message sending, want none", n)
		}
		if err := s.UpdateMessageOutcome(ctx, m.ID, Outcome{Status: StatusSent, SentAt: &t0}); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Fatalf("%d outbox events after sent, want 1", n)
		}
		boom := errors.New("boom")
		if _, err := s.RelayOutbox(ctx, 10, func([]OutboxEvent, map[string]*Message, []WebhookEndpoint) ([]WebhookEvent, JobTx, error) {
			return nil, nil, boom
		}); !errors.Is(err, boom) || count() != 1 {
			t.Fatalf("failed relay = %v, %d left; want boom and the event kept", err, count())
		}
		var seen []OutboxEvent
		n, err := s.RelayOutbox(ctx, 10, func(evs []OutboxEvent, ms map[string]*Message, eps []WebhookEndpoint) ([]WebhookEvent, JobTx, error) {
			seen = evs
			if ms[m.ID] == nil || len(eps) != 1 {
				t.Errorf("plan got messages %v, endpoints %v", ms, eps)
			}
			job := func(ctx context.Context, tx *sql.Tx) error { return nil }
			return []WebhookEvent{{ID: "evt_1", Type: evs[0].Type, Payload: "{}", CreatedAt: evs[0].CreatedAt}}, job, nil
		})
		if err != nil || n != 1 || count() != 0 {
			t.Fatalf("relay = %d, %v, %d left", n, err, count())
		}
		if e := seen[0]; e.Type != "message.sent" || e.MessageID == nil || *e.MessageID != m.ID || e.Status == nil || *e.Status != StatusSent || e.CreatedAt.IsZero() {
			t.Fatalf("outbox event %+v", e)
		}
		if ev, err := s.WebhookEvent(ctx, "evt_1"); err != nil || ev.Type != "message.sent" {
			t.Fatalf("stored event %+v, %v", ev, err)
		}
		if n, err := s.RelayOutbox(ctx, 10, nil); err != nil || n != 0 {
			t.Fatalf("second relay = %d, %v; want nothing left", n, err)
		}
		at := seen[0].CreatedAt
		if n, err := s.PruneWebhookEvents(ctx, at); err != nil || n != 0 {
			t.Fatalf("prune before the event = %d, %v; want it kept", n, err)
		}
		if n, err := s.PruneWebhookEvents(ctx, at.Add(time.Second)); err != nil || n != 1 {
			t.Fatalf("prune after the event = %d, %v; want it gone", n, err)
		}
	})
}

// An endpoint's failing streak: a failure starts it, a success ends it; a
// burst of failures within the first hour disables nothing; 100 in a row
// over an hour, or 5 days without a success, disable it.
func TestWebhookHealth(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		h := WebhookHealth{MaxFailures: 100, MinFailing: time.Hour, MaxFailing: 5 * 24 * time.Hour}
		ep := &WebhookEndpoint{URL: "https://example.com/hook", Events: StringList{"message.sent"}, Enabled: true, Secret: "whsec_x"}
		if err := s.CreateWebhookEndpoint(ctx, ep); err != nil {
			t.Fatal(err)
		}
		ev := &WebhookEvent{ID: "evt_h", Type: "message.sent", Payload: "{}", CreatedAt: time.Now()}
		if err := s.db.Create(ev).Error; err != nil {
			t.Fatal(err)
		}
		reload := func() *WebhookEndpoint {
			e, err := s.WebhookEndpoint(ctx, ep.ID)
			if err != nil {
				t.Fatal(err)
			}
			return e
		}
		attempt := func(ok bool, e *WebhookEndpoint) string {
			t.Helper()
			reason, err := s.RecordWebhookAttempt(ctx, &WebhookDelivery{EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type, Attempt: 1}, ok, e, h)
			if err != nil {
				t.Fatal(err)
			}
			return reason
		}
		since := func(ago time.Duration) *WebhookEndpoint {
			at := time.Now().Add(-ago).UTC()
			if err := s.db.Model(&WebhookEndpoint{}).Where("id = ?", ep.ID).Update("failing_since", at).Error; err != nil {
				t.Fatal(err)
			}
			return reload()
		}
		if attempt(false, reload()) != "" || reload().FailingSince == nil {
			t.Fatalf("a failure did not start the streak: %+v", reload())
		}
		for range 150 { // a burst: the streak is seconds old
			if r := attempt(false, reload()); r != "" {
				t.Fatalf("a burst of failures disabled the endpoint: %s", r)
			}
		}
		if attempt(true, reload()) != "" || reload().FailingSince != nil {
			t.Fatal("a success did not end the streak")
		}
		// 151 attempts logged since two hours ago, a success among them: the
		// count is of the attempts since the streak began, which the success
		// moved; here the streak is set back by hand, so all count.
		if r := attempt(false, since(2*time.Hour)); !strings.HasPrefix(r, "failing: 153 attempts in a row") || reload().Enabled {
			t.Fatalf("100 in a row over two hours: %q, enabled %v", r, reload().Enabled)
		}
		if err := s.db.Model(&WebhookEndpoint{}).Where("id = ?", ep.ID).Update("enabled", true).Error; err != nil {
			t.Fatal(err)
		}
		if r := attempt(false, since(6*24*time.Hour)); !strings.HasPrefix(r, "failing: no success since") {
			t.Fatalf("6 days failing: %q", r)
		}
		if e := reload(); e.Enabled || e.DisabledReason == nil {
			t.Fatalf("endpoint %+v, want disabled with its reason", e)
		}
	})
}

// LatestWebhookDeliveries: the last n attempts of one endpoint, newest
// first, none of another's.
func TestLatestWebhookDeliveries(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		var eps []*WebhookEndpoint
		for range 2 {
			ep := &WebhookEndpoint{URL: "https://example.com/hook", Events: StringList{"message.sent"}, Enabled: true, Secret: "whsec_x"}
			if err := s.CreateWebhookEndpoint(ctx, ep); err != nil {
				t.Fatal(err)
			}
			eps = append(eps, ep)
		}
		ev := &WebhookEvent{ID: "evt_l", Type: "message.sent", Payload: "{}", CreatedAt: time.Now()}
		if err := s.db.Create(ev).Error; err != nil {
			t.Fatal(err)
		}
		base := time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)
		for i := range 25 {
			for j, ep := range eps {
				d := &WebhookDelivery{ID: fmt.Sprintf("d%d-%02d", j, i), EndpointID: ep.ID, EventID: ev.ID,
					EventType: ev.Type, Attempt: i + 1, CreatedAt: base.Add(time.Duration(i) * time.Second)}
				if err := s.db.Create(d).Error; err != nil {
					t.Fatal(err)
				}
			}
		}
		ds, err := s.LatestWebhookDeliveries(ctx, eps[0].ID, 20)
		if err != nil {
			t.Fatal(err)
		}
		var got []int
		for _, d := range ds {
			if d.EndpointID != eps[0].ID {
				t.Errorf("delivery %s of endpoint %s, want only %s's", d.ID, d.EndpointID, eps[0].ID)
			}
			got = append(got, d.Attempt)
		}
		if len(got) != 20 || got[0] != 25 || got[19] != 6 {
			t.Errorf("attempts %v, want 25 down to 6", got)
		}
		if ds, err := s.LatestWebhookDeliveries(ctx, "nothing", 20); err != nil || len(ds) != 0 {
			t.Errorf("an unknown endpoint: %v, %v; want none", ds, err)
		}
	})
}
