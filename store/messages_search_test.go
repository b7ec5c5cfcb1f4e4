package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/nornweave/nornweave/internal/testkit/clocktest"
)

// TestSearchIndexIsSubstringSearch checks that the full-text index answers
// exactly what the scan it replaces answered: a case-insensitive substring,
// with quotes, operators and non-ASCII text taken literally, and that it
// follows updates and the deletes that cascade from an inbox.
func TestSearchIndexIsSubstringSearch(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		ctx := context.Background()
		a := mustCreateInbox(t, s, "alerts@example.com")
		b := mustCreateInbox(t, s, "billing@example.com")
		set := func(subject, body string) func(*Message) {
			return func(m *Message) { m.Subject, m.Text = subject, body }
		}
		quote, _ := mustSend(t, s, a, nil, t0, set(`He said "hi" AND left`, "NEAR the end"))
		accents, _ := mustSend(t, s, a, nil, t0.Add(time.Minute), set("Café crème", "Straße"))
		plain, _ := mustSend(t, s, a, nil, t0.Add(2*time.Minute), set("Weekly report", "numbers inside"))
		mustSend(t, s, b, nil, t0.Add(3*time.Minute), set("Weekly report", "for billing"))

		tests := []struct {
			query string
			want  []*Message
		}{
			{`"hi"`, []*Message{quote}},
			{`SAID "HI" and`, []*Message{quote}},
			{"near the", []*Message{quote}},
			{"AND", []*Message{quote}}, // text, not an FTS5 operator
			{"afé", []*Message{accents}},
			{"crème", []*Message{accents}},
			{"eport", []*Message{plain}},
			{"rs in", []*Message{plain}},
			{"ly", []*Message{plain}}, // two characters: the scan
			{"zq", nil},
			{"report numbers", nil}, // subject and body are separate texts
			{"*", nil},
			{"a OR b", nil},
		}
		for _, tc := range tests {
			t.Run(tc.query, func(t *testing.T) {
				got, total, err := s.Messages(ctx, MessageFilter{InboxID: a.ID, Query: tc.query})
				if err != nil {
					t.Fatalf("Messages: %v", err)
				}
				if total != int64(len(tc.want)) || len(got) != len(tc.want) {
					t.Fatalf("got %d messages (total %d), want %d", len(got), total, len(tc.want))
				}
				want := map[string]bool{}
				for _, m := range tc.want {
					want[m.ID] = true
				}
				for _, m := range got {
					if !want[m.ID] {
						t.Errorf("got message %q, not wanted", m.Subject)
					}
				}
			})
		}

		// Without the count, the same page.
		got, total, err := s.Messages(ctx, MessageFilter{InboxID: a.ID, Query: "eport", SkipTotal: true})
		if err != nil || total != -1 || len(got) != 1 || got[0].ID != plain.ID {
			t.Errorf("SkipTotal: got %d messages, total %d, err %v; want plain, -1, nil", len(got), total, err)
		}

		// The index follows an update of an indexed column...
		if err := s.db.Model(&Message{}).Where("id = ?", plain.ID).Update("body_text", "renamed body").Error; err != nil {
			t.Fatal(err)
		}
		if _, n, _ := s.Messages(ctx, MessageFilter{InboxID: a.ID, Query: "numbers"}); n != 0 {
			t.Errorf("after update: old text still found (%d)", n)
		}
		if _, n, _ := s.Messages(ctx, MessageFilter{InboxID: a.ID, Query: "renamed"}); n != 1 {
			t.Errorf("after update: new text found %d times, want 1", n)
		}
		// ...and the deletes that cascade from an inbox.
		if err := s.DeleteInbox(ctx, a.ID, clocktest.New(t0)); err != nil {
			t.Fatal(err)
		}
		if _, n, _ := s.Messages(ctx, MessageFilter{Query: "Weekly"}); n != 1 {
			t.Errorf("after delete: %d messages found, want 1 (inbox b's)", n)
		}
		if s.driver == DriverSQLite {
			if err := s.db.Exec("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')").Error; err != nil {
				t.Errorf("FTS index out of step with messages: %v", err)
			}
		}
	})
}

// TestSearchUsesIndex fails when a query of three characters or more would
// read every body: the plan must go through the full-text index.
func TestSearchUsesIndex(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		stmt := s.db.Session(&gorm.Session{DryRun: true}).Model(&Message{})
		stmt = s.searchCondition(stmt, "invoice", false).Find(&[]Message{})
		sql := stmt.Statement.SQL.String()
		vars := stmt.Statement.Vars

		var plan []string
		err := s.db.Transaction(func(tx *gorm.DB) error {
			explain := "EXPLAIN QUERY PLAN "
			if s.driver == DriverPostgres {
				// An empty table is cheapest to scan; ask whether the
				// index CAN serve the query.
				if err := tx.Exec("SET LOCAL enable_seqscan = off").Error; err != nil {
					return err
				}
				explain = "EXPLAIN "
			}
			rows, err := tx.Raw(explain+sql, vars...).Rows()
			if err != nil {
				return err
			}
			defer rows.Close()
			cols, _ := rows.Columns()
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					return err
				}
				plan = append(plan, strings.TrimSpace(fmt.Sprint(vals...)))
			}
			return rows.Err()
		})
		if err != nil {
			t.Fatalf("explain: %v", err)
		}
		joined := strings.Join(plan, "\n")
		want := "messages_body_text_trgm_idx"
		if s.driver == DriverSQLite {
			want = "VIRTUAL TABLE INDEX"
		}
		if !strings.Contains(joined, want) {
			t.Errorf("plan does not use %s:\n%s", want, joined)
		}
	})
}

// TestSearchStopsWithItsContext: a search runs under its context, so one
// whose context has ended stops and reports the context's error, which the
// API turns into a 503 (timeout) or 499 (client gone). Interrupting a query
// already running is the drivers' part: pgx sends a cancel request, the
// SQLite driver calls sqlite3_interrupt.
func TestSearchStopsWithItsContext(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, s *Store) {
		in := mustCreateInbox(t, s, "a@example.com")
		for i := range 3 {
			mustSend(t, s, in, nil, t0.Add(time.Duration(i)*time.Second), func(m *Message) { m.Text = "lorem ipsum" })
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, err := s.Messages(ctx, MessageFilter{InboxID: in.ID, Query: "zq"})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled search: got error %v, want context.Canceled", err)
		}
		ctx, cancel = context.WithTimeout(context.Background(), time.Nanosecond)
		defer cancel()
		<-ctx.Done()
		_, _, err = s.Messages(ctx, MessageFilter{InboxID: in.ID, Query: "zq"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("expired search: got error %v, want context.DeadlineExceeded", err)
		}
	})
}

// TestSearchIndexSurvivesVacuum: the SQLite index refers to messages by
// rowid, which SQLite documents as possibly changed by VACUUM for a table
// without an INTEGER PRIMARY KEY. This SQLite keeps them (it copies rows
// with their rowids); the test catches an upgrade that does not.
func TestSearchIndexSurvivesVacuum(t *testing.T) {
	t.Parallel()
	s := migratedStore(t, DriverSQLite)
	ctx := context.Background()
	in := mustCreateInbox(t, s, "a@example.com")
	var ms []*Message
	for i := range 12 {
		m, _ := mustSend(t, s, in, nil, t0.Add(time.Duration(i)*time.Second), func(m *Message) {
			m.Text = fmt.Sprintf("needle-%02d", i)
		})
		ms = append(ms, m)
	}
	for i := 0; i < len(ms); i += 3 { // leave gaps in the rowids
		if err := s.db.Exec("DELETE FROM messages WHERE id = ?", ms[i].ID).Error; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.db.Exec("VACUUM").Error; err != nil {
		t.Fatal(err)
	}
	if err := s.db.Exec("INSERT INTO messages_fts (messages_fts) VALUES ('integrity-check')").Error; err != nil {
		t.Errorf("FTS index out of step with messages after VACUUM: %v", err)
	}
	for i, m := range ms {
		got, _, err := s.Messages(ctx, MessageFilter{Query: fmt.Sprintf("needle-%02d", i)})
		want := 1
		if i%3 == 0 {
			want = 0
		}
		if err != nil || len(got) != want || (want == 1 && got[0].ID != m.ID) {
			t.Errorf("after VACUUM, needle-%02d: got %d messages (err %v), want %d", i, len(got), err, want)
		}
	}
}
