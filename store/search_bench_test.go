package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// BenchmarkSearch100k measures a search as GET /v1/messages?q= runs it
// (the count and a page of 50; POST /v1/search skips the count) over NORNWEAVE_BENCH_MESSAGES messages (default
// 100,000) of ~1 KiB body each, through the full-text index ("indexed")
// and through the substring scan it replaced ("scan"), on both databases.
// Building the corpus takes minutes: it runs under make bench only.
func BenchmarkSearch100k(b *testing.B) {
	n := 100_000
	if v, err := strconv.Atoi(os.Getenv("NORNWEAVE_BENCH_MESSAGES")); err == nil && v > 0 {
		n = v
	}
	queries := []struct{ name, q string }{
		{"rare", "zebrafish"},                      // in 1 message of 1,000
		{"common", "lorem"},                        // in most messages
		{"absent", "no message says this"},         // 20 characters, no match
		{"short", "qz"},                            // 2 characters: the scan, always
		{"long", strings.Repeat("zebrafish ", 25)}, // 250 characters, no match
	}
	for _, driver := range []string{DriverSQLite, DriverPostgres} {
		b.Run(driver, func(b *testing.B) {
			s, inboxID := searchCorpus(b, driver, n)
			for _, q := range queries {
				f := MessageFilter{InboxID: inboxID, Query: q.q, ContentOnly: true, OmitBodies: true, Limit: 50}
				b.Run(q.name+"/indexed", func(b *testing.B) {
					for b.Loop() {
						if _, _, err := s.Messages(context.Background(), f); err != nil {
							b.Fatal(err)
						}
					}
				})
				b.Run(q.name+"/scan", func(b *testing.B) {
					for b.Loop() {
						scanSearch(b, s, f)
					}
				})
			}
		})
	}
}

// scanSearch is the search as it was before migration 0004: LOWER(...)
// LIKE over every row of the inbox, for the count and for the page.
func scanSearch(b *testing.B, s *Store, f MessageFilter) {
	p := "%" + escapeLike(f.Query) + "%"
	where := `inbox_id = ? AND (LOWER(subject) LIKE LOWER(?) ESCAPE '\' OR LOWER(body_text) LIKE LOWER(?) ESCAPE '\')`
	var total int64
	if err := s.db.Model(&Message{}).Where(where, f.InboxID, p, p).Count(&total).Error; err != nil {
		b.Fatal(err)
	}
	var ms []Message
	err := s.db.Select(s.headColumns()).Where(where, f.InboxID, p, p).
		Order("created_at DESC, id DESC").Limit(f.Limit).Find(&ms).Error
	if err != nil {
		b.Fatal(err)
	}
}

// searchCorpus fills a new database with n messages in one inbox.
func searchCorpus(b *testing.B, driver string, n int) (*Store, string) {
	ctx := context.Background()
	o := Options{Driver: driver, DSN: testdb.SQLitePath(b)}
	if driver == DriverPostgres {
		o.DSN = testdb.PostgresURL(b)
	}
	s, err := Open(ctx, o)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if err := s.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	in := &Inbox{EmailAddress: "bench@example.com", CreatedAt: t0}
	if err := s.CreateInbox(ctx, in); err != nil {
		b.Fatal(err)
	}
	th := &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h", CreatedAt: t0, LastMessageAt: t0}
	if err := s.db.Create(th).Error; err != nil {
		b.Fatal(err)
	}
	words := strings.Fields("lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod " +
		"tempor incididunt ut labore et dolore magna aliqua enim ad minim veniam quis nostrud " +
		"exercitation ullamco laboris nisi aliquip ex ea commodo consequat invoice shipment order " +
		"delivery payment account customer support refund receipt")
	rng := rand.New(rand.NewPCG(1, 2))
	start := time.Now()
	const batch = 500
	ms := make([]Message, 0, batch)
	for i := range n {
		var body strings.Builder
		for body.Len() < 1000 {
			body.WriteString(words[rng.IntN(len(words))])
			body.WriteByte(' ')
		}
		if i%1000 == 0 {
			body.WriteString("Zebrafish ")
		}
		at := t0.Add(time.Duration(i) * time.Second)
		ms = append(ms, Message{ID: fmt.Sprintf("m%07d", i), ThreadID: th.ID, InboxID: in.ID,
			Direction: DirectionOutbound, Status: StatusSent, MessageIDHeader: fmt.Sprintf("<%d@example.com>", i),
			Subject: words[rng.IntN(len(words))] + " " + strconv.Itoa(i), FromAddress: in.EmailAddress,
			Text: body.String(), CreatedAt: at, SentAt: &at})
		if len(ms) == batch || i == n-1 {
			if err := s.db.Create(&ms).Error; err != nil {
				b.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	if driver == DriverPostgres {
		// What autovacuum does after a bulk load: fresh statistics, and the
		// GIN pending list merged into the index proper (until it is, the
		// planner prices the index above a scan).
		if err := s.db.Exec("VACUUM ANALYZE messages").Error; err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("%s: %d messages stored and indexed in %s", driver, n, time.Since(start).Round(time.Second))
	return s, in.ID
}
