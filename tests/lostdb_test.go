package tests

import (
	"context"
	"database/sql"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
)

// TestBadInputLostDatabaseConnection is issue 17, item 18 (the store's
// half): after PostgreSQL terminates every connection of the server, the
// next requests are served on new ones, as the dead ones are found out
// before anything is written on them; while the database refuses
// connections, the answer is 503 database_unavailable with Retry-After,
// never 500; and once it is back, requests succeed again.
func TestBadInputLostDatabaseConnection(t *testing.T) {
	t.Parallel()
	s := startDefault(t, "postgres", nil)
	inbox := s.createInbox(t, "support")
	mustStatus(t, s.send(t, inbox, "a@b.test"), http.StatusCreated)

	admin := adminDB(t, s.cfg)
	ctx := context.Background()
	db := databaseName(t, s.cfg)
	// Waits (up to 5 s each) until the backends are gone: a request sent
	// while one is still dying may have reached it, and gets a 503.
	terminate := func() {
		t.Helper()
		if _, err := admin.ExecContext(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity
			WHERE datname = $1 AND pid <> pg_backend_pid()`, db); err != nil {
			t.Fatal(err)
		}
	}

	terminate()
	for i := range 3 {
		mustStatus(t, s.send(t, inbox, "a@b.test"), http.StatusCreated)
		r := s.do(t, "GET", "/v1/messages?inbox_id="+inbox, nil)
		mustStatus(t, r, http.StatusOK)
		if got := r.JSON(t)["total"]; got != float64(2+i) {
			t.Fatalf("total = %v, want %d", got, 2+i)
		}
	}
	// The server lock died with its session; the server takes it again, so
	// that no second server can take the database it believes its own.
	held := func() bool {
		var n int
		if err := admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
			WHERE l.locktype = 'advisory' AND l.granted AND a.datname = $1
			AND l.classid = 1852797550 AND l.objid = 1869505841`, db).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	for deadline := time.Now().Add(15 * time.Second); !held(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the server lock is not held again 15 s after its session was terminated")
		}
	}

	if _, err := admin.ExecContext(ctx, `ALTER DATABASE "`+db+`" ALLOW_CONNECTIONS false`); err != nil {
		t.Fatal(err)
	}
	terminate()
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/messages?inbox_id=" + inbox}, {"GET", "/v1/threads?inbox_id=" + inbox}, {"GET", "/v1/inboxes"},
		{"POST", "/v1/messages"},
	} {
		var body any
		if req.method == "POST" {
			body = map[string]any{"inbox_id": inbox, "to": []string{"a@b.test"}, "subject": "s", "body": "b"}
		}
		r := s.do(t, req.method, req.path, body)
		var e struct{ Code string }
		_ = json.Unmarshal(r.Body, &e)
		if r.Status != http.StatusServiceUnavailable || e.Code != "database_unavailable" || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s with the database refusing connections: %d %s Retry-After %q, want 503 database_unavailable with Retry-After",
				req.method, req.path, r.Status, r.Body, r.Header.Get("Retry-After"))
		}
	}
	if _, err := admin.ExecContext(ctx, `ALTER DATABASE "`+db+`" ALLOW_CONNECTIONS true`); err != nil {
		t.Fatal(err)
	}
	mustStatus(t, s.send(t, inbox, "a@b.test"), http.StatusCreated)
}

// adminDB connects to the server's PostgreSQL outside its own database.
func adminDB(t *testing.T, cfg config.Config) *sql.DB {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/postgres"
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func databaseName(t *testing.T, cfg config.Config) string {
	u, err := url.Parse(cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimPrefix(u.Path, "/")
}
