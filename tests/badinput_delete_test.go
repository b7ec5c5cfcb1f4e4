package tests

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// TestBadInputSendRacesDeleteOnAnotherServer: two servers on one
// database. A deletion through B of an inbox whose send A has with the
// mail server waits for that send, which the database orders, not either
// server's memory: the send is recorded and answered 201 sent, and only
// then are the inbox and its message gone; a later send is refused 404
// with nothing sent, even one that comes while the deletion waits; no
// record is lost (no WARN) and nothing is logged at ERROR (issue 25: 201
// sent for a message that then answered 404). B's log line that the
// deletion waits, and the database's word that the late send waits for a
// lock, are what the test waits for: no timer.
func TestBadInputSendRacesDeleteOnAnotherServer(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	cfg := baseConfig(t, "postgres", mx)
	cfg.ThrottleBackend = "postgres"
	a, logsA := startWatchedConfig(t, cfg, mx)
	b, logsB := startWatchedConfig(t, cfg, mx)
	inbox := a.createInbox(t, "doomed")
	hold := mx.HoldAt(smtptest.AtData)
	defer hold.Release()

	sent := make(chan response, 1)
	go func() { sent <- a.send(t, inbox, "ann@example.com") }()
	<-hold.Reached()
	deleted := make(chan response, 1)
	go func() { deleted <- b.do(t, "DELETE", "/v1/inboxes/"+inbox, nil) }()
	select {
	case <-logsB.wait("inbox deletion waits for its sends in flight"):
	case r := <-deleted:
		t.Fatalf("the inbox was deleted through another server (%d) while its send was with the mail server", r.Status)
	}
	// A send through A after the deletion began waits behind it in the
	// database, so the deletion's wait cannot be stretched by new sends.
	late := make(chan response, 1)
	go func() { late <- a.send(t, inbox, "bob@example.com") }()
	waitForLockWait(t, cfg, late)
	hold.Release()
	r := <-sent
	mustStatus(t, r, http.StatusCreated)
	if st := r.JSON(t)["status"]; st != "sent" {
		t.Errorf("send: status %v, want sent", st)
	}
	mustStatus(t, <-deleted, http.StatusNoContent)
	mustStatus(t, <-late, http.StatusNotFound)
	mustStatus(t, a.do(t, "GET", "/v1/inboxes/"+inbox, nil), http.StatusNotFound)
	if n := mx.Count(); n != 1 {
		t.Errorf("%d messages at the mail server, want 1 (the send that won)", n)
	}
	checkNoLostRecord(t, logsA, logsB)
}

// TestBadInputHeldSendRacesDeleteOnAnotherServer is the race for a
// scheduled message dispatched by A while B deletes its inbox: B waits
// for the dispatch to be recorded. B starts once A holds the message at
// the mail server, so that A, not B, dispatches it.
func TestBadInputHeldSendRacesDeleteOnAnotherServer(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	cfg := baseConfig(t, "postgres", mx)
	cfg.ThrottleBackend = "postgres"
	a, logsA := startWatchedConfig(t, cfg, mx)
	inbox := a.createInbox(t, "doomed")
	hold := mx.HoldAt(smtptest.AtData)
	defer hold.Release()
	mustStatus(t, a.sendAt(t, inbox, "ann@example.com", time.Now().Add(2*time.Second)), http.StatusAccepted)
	<-hold.Reached()

	b, logsB := startWatchedConfig(t, cfg, mx)
	deleted := make(chan response, 1)
	go func() { deleted <- b.do(t, "DELETE", "/v1/inboxes/"+inbox, nil) }()
	select {
	case <-logsB.wait("inbox deletion waits for its sends in flight"):
	case r := <-deleted:
		t.Fatalf("the inbox was deleted through another server (%d) while its held send was with the mail server", r.Status)
	}
	hold.Release()
	mustStatus(t, <-deleted, http.StatusNoContent)
	<-logsA.wait(`"msg":"message sent"`)
	if n := mx.Count(); n != 1 {
		t.Errorf("%d messages at the mail server, want 1", n)
	}
	checkNoLostRecord(t, logsA, logsB)
}

// TestBadInputStaleSendDoesNotHoldDelete: a send a crashed server left in
// flight, its deadline passed, can record nothing more and must not hold
// its inbox's deletion; a live one's holds it only until its deadline,
// which ends the wait whether or not that server comes back. The server
// runs on a fake clock, which the test moves past the deadline. (On
// SQLite one server owns the file and resolves its sends at start-up; the
// store's TestDeleteInboxWaitsForLiveSends covers both databases.)
func TestBadInputStaleSendDoesNotHoldDelete(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	cfg := baseConfig(t, "postgres", mx)
	clock := clocktest.New(time.Now().UTC())
	logs := &logWatch{tb: t}
	s := &server{Server: apptest.StartWith(t, cfg, apptest.Options{Log: logs, LogLevel: slog.LevelInfo, Clock: clock}),
		SMTP: mx, cfg: cfg}
	st, err := app.OpenStore(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	crashed := func(inbox string, deadline time.Time) {
		t.Helper()
		if _, err := st.SQL().Exec(`INSERT INTO send_log (id, inbox_id, scope, reserved_at, deadline)
			VALUES ($1, $2, 'x@example.com', $3, $4)`, "crashed-"+inbox, inbox, deadline.Add(-time.Minute), deadline); err != nil {
			t.Fatal(err)
		}
	}
	stale := s.createInbox(t, "stale")
	crashed(stale, clock.Now().Add(-time.Second))
	mustStatus(t, s.do(t, "DELETE", "/v1/inboxes/"+stale, nil), http.StatusNoContent)
	if len(logs.matching("inbox deletion waits")) != 0 {
		t.Errorf("the deletion waited for a send whose deadline had passed")
	}

	live := s.createInbox(t, "live")
	crashed(live, clock.Now().Add(time.Minute))
	deleted := make(chan response, 1)
	go func() { deleted <- s.do(t, "DELETE", "/v1/inboxes/"+live, nil) }()
	select {
	case <-logs.wait("inbox deletion waits for its sends in flight"):
	case r := <-deleted:
		t.Fatalf("the inbox was deleted (%d) while a send of it was in flight", r.Status)
	}
	mustStatus(t, s.do(t, "GET", "/v1/inboxes/"+live, nil), http.StatusOK)
	// Past the deadline: the deletion's next try, whenever its timer is
	// set, goes through. Advance until it has (its timer may be set just
	// after an Advance, so one is not enough).
	for {
		clock.Advance(time.Minute)
		select {
		case r := <-deleted:
			mustStatus(t, r, http.StatusNoContent)
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// waitForLockWait returns once a session of cfg's PostgreSQL database
// waits for a lock: the late send's first write waiting for a deletion
// that holds its inbox's row. The test fails if the late send is answered
// first.
func waitForLockWait(t *testing.T, cfg config.Config, late <-chan response) {
	t.Helper()
	st, err := app.OpenStore(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for waiting := false; !waiting; {
		select {
		case r := <-late:
			t.Fatalf("a send that came while the deletion waited was answered %d before it ended: %s", r.Status, r.Body)
		case <-time.After(5 * time.Millisecond):
		}
		err := st.SQL().QueryRow(`SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
	}
}

// checkNoLostRecord fails the test if any server logged at ERROR or lost
// the record of a send to its inbox's deletion.
func checkNoLostRecord(t *testing.T, logs ...*logWatch) {
	t.Helper()
	for _, l := range logs {
		if errs := l.matching(`"level":"ERROR"`); len(errs) > 0 {
			t.Errorf("logged at ERROR: %s", strings.Join(errs, "\n"))
		}
		if lost := l.matching("message deleted with its inbox while it was being sent"); len(lost) > 0 {
			t.Errorf("a send's record was lost to its inbox's deletion: %s", strings.Join(lost, "\n"))
		}
	}
}
