package tests

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nornweave/nornweave/store"
)

// adminInboxes is how many inboxes the dashboard benchmark's messages
// are spread over.
const adminInboxes = 20

// adminCorpus writes SQL that fills a database of one dialect in bulk: a
// series of integers made by the database (generate_series, or a
// recursive CTE on SQLite) joined to the inboxes, and times computed by
// the database from now, written as the driver writes a time.Time.
type adminCorpus struct {
	driver string
	now    time.Time // whole seconds, UTC
}

// insert is "INSERT INTO table (cols) SELECT sel FROM <i in [lo, hi)>
// [CROSS JOIN cross] JOIN <inbox number k> ON ib.k = inbox", where sel
// and inbox may use i and ib.id, ib.email_address.
func (c adminCorpus) insert(table, cols, sel, cross, inbox string, lo, hi int) string {
	ib := fmt.Sprintf(`JOIN (SELECT id, email_address, row_number() OVER (ORDER BY id) - 1 AS k FROM inboxes) AS ib
		ON ib.k = %s`, inbox)
	if cross != "" {
		ib = "CROSS JOIN " + cross + " " + ib
	}
	if c.driver == store.DriverPostgres {
		return fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM generate_series(%d::bigint, %d) AS s(i) %s",
			table, cols, sel, lo, hi-1, ib)
	}
	return fmt.Sprintf("WITH RECURSIVE s(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM s WHERE i + 1 < %d) "+
		"INSERT INTO %s (%s) SELECT %s FROM s %s", lo, hi, table, cols, sel, ib)
}

// ago is the time secs (an SQL expression) seconds before base; a
// negative secs is after it. On SQLite it is the text modernc's driver
// writes for a UTC time.Time of whole seconds (time.Time.String), which
// sorts and compares with the times the store binds.
func (c adminCorpus) ago(base time.Time, secs string) string {
	if c.driver == store.DriverPostgres {
		return fmt.Sprintf("(TIMESTAMPTZ '%s+00' - (%s) * INTERVAL '1 second')", base.Format(time.DateTime), secs)
	}
	return fmt.Sprintf("(strftime('%%Y-%%m-%%d %%H:%%M:%%S', '%s', (-(%s)) || ' seconds') || ' +0000 UTC')",
		base.Format(time.DateTime), secs)
}

// fillAdmin fills the database of a running server (its 20 inboxes made
// through the API) with the dashboard's 100,000-message shape: n messages
// over the last 7 days, one thread each, ~4% failed (none of the last
// inbox by id, whose failed mail the dashboard finds empty) and ~1% held (half
// scheduled days ahead, half queued in the last hour with a next
// attempt), the rest sent; 6,000 throttle log rows over the last 10
// minutes, skewed to the first inboxes; send_counts for every minute of
// the last day and every hour of the last 30 days, of the seven kinds;
// 10,000 bounces and complaints over 30 days. Held rows get no River job,
// so the server leaves them where they are; the queued ones are younger
// than QUEUE_MAX_AGE, so the janitor does too. Each chunk is one statement
// (its own transaction), so the server's own writes wait on none for long.
func fillAdmin(b *testing.B, st *store.Store, driver string, n int) {
	ctx := context.Background()
	c := adminCorpus{driver: driver, now: time.Now().UTC().Truncate(time.Second)}
	minute, hour := c.now.Truncate(time.Minute), c.now.Truncate(time.Hour)
	age := fmt.Sprintf("(CASE WHEN i %% 97 = 0 THEN i %% 3000 ELSE (i * 604800) / %d END)", n)
	at := c.ago(c.now, age)
	status := `CASE WHEN i % 194 = 0 THEN 'scheduled' WHEN i % 97 = 0 THEN 'queued'
		WHEN i % 23 = 1 AND i % 20 <> 19 THEN 'failed' ELSE 'sent' END`
	var stmts []string
	const chunk = 10_000
	for lo := 0; lo < n; lo += chunk {
		hi := min(lo+chunk, n)
		inbox := fmt.Sprintf("s.i %% %d", adminInboxes)
		stmts = append(stmts,
			c.insert("threads", "id, inbox_id, subject, participant_hash, last_message_at, created_at",
				fmt.Sprintf("'bt' || i, ib.id, 'Order ' || i, 'h' || i, %s, %s", at, at), "", inbox, lo, hi),
			c.insert("messages", "id, thread_id, inbox_id, direction, status, error, provider_message_id, "+
				"message_id_header, subject, from_address, to_addresses, body_text, size, created_at, sent_at, "+
				"scheduled_at, next_attempt_at, attempts",
				fmt.Sprintf(`'bm' || i, 'bt' || i, ib.id, 'outbound', %[1]s,
					CASE WHEN %[1]s = 'failed' THEN '550 5.1.1 mailbox unavailable' END,
					CASE WHEN %[1]s = 'sent' THEN '<p' || i || '@provider.test>' END,
					'<bm' || i || '@acme.test>', 'Order ' || i || ' has shipped', ib.email_address,
					'["customer' || i || '@customer.test"]', 'Hello, your order ' || i || ' has shipped.', 200,
					%[2]s, CASE WHEN %[1]s = 'sent' THEN %[2]s END,
					CASE WHEN %[1]s = 'scheduled' THEN %[3]s END, CASE WHEN %[1]s = 'queued' THEN %[4]s END,
					CASE WHEN %[1]s IN ('sent', 'failed', 'queued') THEN 1 ELSE 0 END`,
					status, at, c.ago(c.now, "-(86400 + i % 432000)"), c.ago(c.now, "-600")),
				"", inbox, lo, hi))
	}
	kinds := `(SELECT 'sent' AS kind UNION ALL SELECT 'failed' UNION ALL SELECT 'unknown' UNION ALL SELECT 'throttled'
		UNION ALL SELECT 'domain_blocked' UNION ALL SELECT 'suppressed' UNION ALL SELECT 'validation') AS kd`
	counts := "CASE kd.kind WHEN 'sent' THEN 40 + i % 30 WHEN 'failed' THEN 1 + i % 4 ELSE i % 3 END"
	stmts = append(stmts,
		// Skewed: inbox k takes a share that falls with k.
		c.insert("send_log", "id, inbox_id, scope, reserved_at, deadline, counted_at",
			fmt.Sprintf("'bs' || i, ib.id, ib.email_address, %s, %s, %s",
				c.ago(c.now, "i % 600"), c.ago(c.now, "i % 600 - 60"), c.ago(c.now, "i % 600")), "",
			fmt.Sprintf("s.i %% (1 + s.i %% %d)", adminInboxes), 0, 6000),
		// The inbox join is only insert's shape: k = 0 is one row.
		c.insert("send_counts", `width, start, kind, count`,
			fmt.Sprintf("'minute', %s, kd.kind, %s", c.ago(minute, "i * 60"), counts), kinds, "0", 0, 24*60),
		c.insert("send_counts", `width, start, kind, count`,
			fmt.Sprintf("'hour', %s, kd.kind, 60 * (%s)", c.ago(hour, "i * 3600"), counts), kinds, "0", 0, 30*24),
		c.insert("delivery_events", "id, message_id, provider, event_key, type, bounce_type, recipient, "+
			"occurred_at, smtp_status, created_at",
			fmt.Sprintf(`'be' || i, 'bm' || ((i * 7919) %% %d), 'smtp', 'bk' || i,
				CASE WHEN i %% 5 = 0 THEN 'complained' ELSE 'bounced' END,
				CASE WHEN i %% 5 = 0 THEN NULL WHEN i %% 2 = 0 THEN 'hard' ELSE 'soft' END,
				'customer' || i || '@customer.test', %[2]s, '5.1.1', %[2]s`, n, c.ago(c.now, "i * 259")),
			"", "0", 0, 10_000),
	)
	start := time.Now()
	for _, q := range stmts {
		if _, err := st.SQL().ExecContext(ctx, q); err != nil {
			b.Fatalf("fill: %v\n%s", err, q)
		}
	}
	var got int64
	if err := st.SQL().QueryRowContext(ctx, "SELECT count(*) FROM messages").Scan(&got); err != nil || got < int64(n) {
		b.Fatalf("filled %d messages (%v), want %d", got, err, n)
	}
	b.Logf("%s: %d messages and the rest stored in %s", driver, n, time.Since(start).Round(time.Second))
}

// analyze gives the planner statistics: what autovacuum does on
// PostgreSQL soon after a bulk load, and what ANALYZE (never run by the
// server itself) does on SQLite.
func analyze(b *testing.B, st *store.Store) {
	if _, err := st.SQL().ExecContext(context.Background(), "ANALYZE"); err != nil {
		b.Fatal(err)
	}
}
