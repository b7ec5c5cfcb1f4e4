package app

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// The janitor warns when the hard bounces or complaints of the last day
// pass SES's review thresholds over enough sends, and then not again for
// an hour; soft bounces do not count.
func TestJanitorWarnsOfReputation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	in := &store.Inbox{EmailAddress: "agent@acme.test", Name: "A", CreatedAt: now, UpdatedAt: now}
	if err := st.CreateInbox(ctx, in); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	j := &janitor{store: st, logger: slog.New(slog.NewTextHandler(&buf, nil))}
	warnings := func() int { return strings.Count(buf.String(), "bounce or complaint rate over") }

	var ids []string
	for i := range minReputationSample {
		sent := now.Add(-time.Hour)
		m := &store.Message{InboxID: in.ID, Status: store.StatusSent, MessageIDHeader: fmt.Sprintf("<%d@acme.test>", i),
			Subject: "s", FromAddress: in.EmailAddress, ToAddresses: store.StringList{fmt.Sprintf("r%d@example.org", i)},
			CreatedAt: sent, SentAt: &sent}
		th := &store.Thread{InboxID: in.ID, Subject: "s", ParticipantHash: fmt.Sprint(i), CreatedAt: sent, LastMessageAt: sent}
		if err := st.CreateMessage(ctx, m, nil, th, nil); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	bounce := func(i int, kind string) store.EventRecord {
		return store.EventRecord{Event: store.DeliveryEvent{MessageID: ids[i], Provider: "ses", EventKey: fmt.Sprint(kind, i),
			Type: "bounced", BounceType: &kind, Recipient: fmt.Sprintf("r%d@example.org", i), OccurredAt: now, CreatedAt: now}}
	}
	var recs []store.EventRecord
	for i := range 5 { // 5 %: at the threshold, not past it
		recs = append(recs, bounce(i, "hard"))
	}
	for i := 5; i < 20; i++ {
		recs = append(recs, bounce(i, "soft"))
	}
	if _, err := st.RecordEvents(ctx, recs); err != nil {
		t.Fatal(err)
	}
	j.reputation(ctx, now)
	if n := warnings(); n != 0 {
		t.Fatalf("%d warnings at 5 %% hard bounces and 15 soft, want none:\n%s", n, buf.String())
	}
	if _, err := st.RecordEvents(ctx, []store.EventRecord{bounce(20, "hard")}); err != nil {
		t.Fatal(err)
	}
	j.reputation(ctx, now)
	j.reputation(ctx, now.Add(59*time.Minute))
	if n := warnings(); n != 1 || !strings.Contains(buf.String(), "bounce_rate=0.06") {
		t.Fatalf("%d warnings at 6 %% within the hour, want 1 with the rate:\n%s", n, buf.String())
	}
	j.reputation(ctx, now.Add(61*time.Minute))
	if n := warnings(); n != 2 {
		t.Errorf("%d warnings an hour later, want 2", n)
	}
}

// The janitor prunes the logouts of expired sessions with the other
// prunes, and not at start; those of sessions still valid stay.
func TestJanitorPrunesAdminLogouts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Options{Driver: store.DriverSQLite, DSN: filepath.Join(t.TempDir(), "j.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	if err := st.CreateAdminLogout(ctx, "expired", now.Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateAdminLogout(ctx, "valid", now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	j := &janitor{store: st, logger: slog.New(slog.NewTextHandler(&buf, nil))}
	loggedOut := func(id string) bool {
		t.Helper()
		gone, err := st.AdminLoggedOut(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return gone
	}

	j.prune(ctx, now, false)
	if !loggedOut("expired") {
		t.Error("the start's prune deleted a logout; want it left to the next")
	}
	j.prune(ctx, now, true)
	if loggedOut("expired") || !loggedOut("valid") {
		t.Errorf("after prune: expired kept = %v, valid kept = %v; want false, true", loggedOut("expired"), loggedOut("valid"))
	}
	if buf.Len() > 0 {
		t.Errorf("logged %q, want nothing", buf.String())
	}
}
