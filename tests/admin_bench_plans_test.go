package tests

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/store"
)

// adminPlans logs the plan of every statement the three timed pages run,
// on a's filled database: EXPLAIN (ANALYZE, BUFFERS) on PostgreSQL,
// EXPLAIN QUERY PLAN on SQLite. The statements are the store's own,
// captured as it runs them (Options.Trace) when called as the api
// package's handlers call it (api/admin.go, admin_activity.go,
// admin_messages.go, and the session check of api/admin/admin.go);
// Trace gives them with their placeholders, and each call lists the
// values it binds, in order. A plan that reads messages without an index
// fails the benchmark. On PostgreSQL the generic plan is logged too: the
// server's connections prepare their statements (pgx's statement cache),
// and from a statement's sixth execution PostgreSQL keeps the plan made
// without the values if it costs no more than the custom ones did on
// average, which depends on the values the earlier executions had. (It is
// logged, not checked: HeldStats' generic plan scans, and costs six
// times its custom plan, which PostgreSQL therefore keeps.)
func adminPlans(b *testing.B, a *adminBench) {
	ctx := context.Background()
	st := a.st
	now := time.Now().UTC()
	minute, hour := now.Truncate(time.Minute), now.Truncate(time.Hour)
	// with is vs and, on PostgreSQL, a LIMIT's value: gorm binds it
	// there, and writes it in the statement on SQLite.
	with := func(limit int, vs ...any) []any {
		if a.driver == store.DriverPostgres {
			return append(vs, limit)
		}
		return vs
	}
	calls := []struct {
		page, what string
		run        func() error
		args       [][]any // per statement
	}{
		{"every page", "the session's logout (AdminLoggedOut)", func() error {
			_, err := st.AdminLoggedOut(ctx, "session")
			return err
		}, [][]any{with(1, "session")}},
		{"/admin", "busiest inboxes in the minute (BusiestInboxes)", func() error {
			ins, err := st.BusiestInboxes(ctx, now.Add(-time.Minute), 10)
			if err == nil && len(ins) < 10 {
				err = fmt.Errorf("%d busiest inboxes: the overview would read Inboxes too", len(ins))
			}
			return err
		}, [][]any{with(10, now.Add(-time.Minute))}},
		{"/admin", "the last hour by minute (SendCounts)", func() error {
			_, err := st.SendCounts(ctx, store.WidthMinute, minute.Add(-59*time.Minute), minute.Add(time.Minute))
			return err
		}, [][]any{{store.WidthMinute, minute.Add(-59 * time.Minute), minute.Add(time.Minute)}}},
		{"/admin", "the last week by hour (SendCounts)", func() error {
			_, err := st.SendCounts(ctx, store.WidthHour, hour.Add(-167*time.Hour), hour.Add(time.Hour))
			return err
		}, [][]any{{store.WidthHour, hour.Add(-167 * time.Hour), hour.Add(time.Hour)}}},
		{"/admin", "bounces and complaints in 24 h (Complaints)", func() error {
			_, _, err := st.Complaints(ctx, now.Add(-24*time.Hour))
			return err
		}, [][]any{with(1, now.Add(-24*time.Hour))}},
		{"/admin", "held counts, oldest queued (HeldStats)", func() error {
			_, err := st.HeldStats(ctx)
			return err
		}, [][]any{{store.StatusScheduled, store.StatusQueued}, with(1, store.StatusQueued)}},
		{"/admin/messages", "newest 101 (Messages)", func() error {
			_, _, err := st.Messages(ctx, store.MessageFilter{Limit: admin.MessagePageSize + 1, OmitBodies: true, SkipTotal: true})
			return err
		}, [][]any{with(admin.MessagePageSize + 1)}},
		{"/admin/messages?status=failed&inbox_id=", "newest 101 failed of an inbox (Messages)", func() error {
			_, _, err := st.Messages(ctx, store.MessageFilter{InboxID: a.inbox, Status: store.StatusFailed,
				Limit: admin.MessagePageSize + 1, OmitBodies: true, SkipTotal: true})
			return err
		}, [][]any{with(admin.MessagePageSize+1, a.inbox, store.StatusFailed)}},
		{"/admin/messages?status=failed&inbox_id=", "the same of an inbox without failed mail (Messages)", func() error {
			_, _, err := st.Messages(ctx, store.MessageFilter{InboxID: a.quiet, Status: store.StatusFailed,
				Limit: admin.MessagePageSize + 1, OmitBodies: true, SkipTotal: true})
			return err
		}, [][]any{with(admin.MessagePageSize+1, a.quiet, store.StatusFailed)}},
		{"/admin/messages?status=sent&inbox_id=", "the newest sent of an inbox without mail (Messages)", func() error {
			_, _, err := st.Messages(ctx, store.MessageFilter{InboxID: a.fresh, Status: store.StatusSent,
				Limit: admin.MessagePageSize + 1, OmitBodies: true, SkipTotal: true})
			return err
		}, [][]any{with(admin.MessagePageSize+1, a.fresh, store.StatusSent)}},
	}
	var out strings.Builder
	for _, c := range calls {
		var err error
		sqls := a.stmts.during(func() { err = c.run() })
		for i := range sqls {
			sqls[i] = dollars.ReplaceAllString(sqls[i], "$1") // gorm's rendering without values: $1$
			// gorm's Scan traces its statement with the values written
			// in; HeldStats binds them.
			sqls[i] = strings.NewReplacer(`IN ('scheduled','queued')`, `IN ($1,$2)`,
				`IN ("scheduled","queued")`, `IN (?,?)`).Replace(sqls[i])
		}
		if err != nil {
			b.Fatalf("%s: %v", c.what, err)
		}
		if len(sqls) != len(c.args) {
			b.Fatalf("%s ran %d statements, want %d: %q", c.what, len(sqls), len(c.args), sqls)
		}
		for i, sql := range sqls {
			plan := explain(b, a, sql, c.args[i])
			if m := scans.FindString(plan); m != "" {
				b.Errorf("%s: %s scans a table without an index (%q):\n%s", a.driver, c.what, m, plan)
			}
			if a.driver == store.DriverPostgres {
				plan = "EXPLAIN:\n" + plan + "\nthe generic plan:\n" + explainGeneric(b, a, sql, c.args[i])
			}
			fmt.Fprintf(&out, "\n-- %s: %s\n%s\n%s\n", c.page, c.what, sql, plan)
		}
	}
	b.Logf("%s plans:%s", a.driver, out.String())
}

// scans matches a plan line reading messages whole, not along an index.
// (The small tables may be: send_counts holds a bounded 15,120 rows, and
// PostgreSQL reads a week of its hours, a third of them, by a scan.)
var scans = regexp.MustCompile(`(?m)Seq Scan on messages\b|SCAN (TABLE )?messages( AS \w+)?$`)

// explain returns sql's plan with args bound.
func explain(b *testing.B, a *adminBench, sql string, args []any) string {
	ctx := context.Background()
	for i, v := range args {
		if t, ok := v.(time.Time); ok {
			args[i] = t.UTC() // as the store binds times
		}
	}
	if a.driver == store.DriverPostgres {
		if n := len(placeholders.FindAllString(sql, -1)); n != len(args) {
			b.Fatalf("%d values for the %d placeholders of %s", len(args), n, sql)
		}
		rows, err := a.st.SQL().QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		if err != nil {
			b.Fatalf("explain %s: %v", sql, err)
		}
		return planText(b, rows)
	}
	rows, err := a.st.SQL().QueryContext(ctx, "EXPLAIN QUERY PLAN "+sql, args...)
	if err != nil {
		b.Fatalf("explain %s: %v", sql, err)
	}
	defer rows.Close()
	depth := map[int]int{0: 0}
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			b.Fatal(err)
		}
		depth[id] = depth[parent] + 1
		lines = append(lines, strings.Repeat("  ", depth[id]-1)+detail)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// dollars is a PostgreSQL placeholder as gorm's Explain renders it
// without its value.
var dollars = regexp.MustCompile(`(\$\d+)\$`)

// placeholders matches PostgreSQL's distinct placeholders ($1, $2, ...).
var placeholders = regexp.MustCompile(`\$\d+\b`)

// explainGeneric is PostgreSQL's generic plan of sql (planned without
// the values; its conditions show $1, $2), run with args.
func explainGeneric(b *testing.B, a *adminBench, sql string, args []any) string {
	ctx := context.Background()
	conn, err := a.st.SQL().Conn(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	lits := make([]string, len(args))
	for i, v := range args {
		switch v := v.(type) {
		case string:
			lits[i] = "'" + strings.ReplaceAll(v, "'", "''") + "'"
		case time.Time:
			lits[i] = "'" + v.UTC().Format(time.RFC3339Nano) + "'::timestamptz"
		default:
			lits[i] = fmt.Sprint(v)
		}
	}
	exec := "EXECUTE admin_plan(" + strings.Join(lits, ", ") + ")"
	for _, q := range []string{"SET plan_cache_mode = force_generic_plan", "PREPARE admin_plan AS " + sql} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			b.Fatalf("%s: %v", q, err)
		}
	}
	defer conn.ExecContext(ctx, "DEALLOCATE admin_plan; RESET plan_cache_mode")
	rows, err := conn.QueryContext(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+exec)
	if err != nil {
		b.Fatalf("explain the generic plan of %s: %v", sql, err)
	}
	return planText(b, rows)
}

// planText is the lines of an EXPLAIN's answer, one a row, and closes rows.
func planText(b *testing.B, rows *sql.Rows) string {
	b.Helper()
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var l string
		if err := rows.Scan(&l); err != nil {
			b.Fatal(err)
		}
		lines = append(lines, l)
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n")
}
