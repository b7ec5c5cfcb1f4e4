package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/testdb"
)

// BenchmarkCreateMessage measures the write on the send path: a message
// with one attachment in a new thread, in one transaction.
func BenchmarkCreateMessage(b *testing.B) {
	for _, driver := range []string{DriverPostgres, DriverSQLite} {
		b.Run(driver, func(b *testing.B) {
			ctx := context.Background()
			o := Options{Driver: driver, DSN: testdb.SQLitePath(b)}
			if driver == DriverPostgres {
				o.DSN = testdb.PostgresURL(b)
			}
			s, err := Open(ctx, o)
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer s.Close()
			if err := s.Migrate(ctx); err != nil {
				b.Fatalf("Migrate: %v", err)
			}
			in := &Inbox{EmailAddress: "bench@example.com", CreatedAt: t0}
			if err := s.CreateInbox(ctx, in); err != nil {
				b.Fatalf("CreateInbox: %v", err)
			}
			i := 0
			for b.Loop() {
				i++
				m := &Message{InboxID: in.ID, MessageIDHeader: fmt.Sprintf("<%d@example.com>", i), Subject: "s",
					ToAddresses: StringList{"to@example.org"}, Text: "body", CreatedAt: t0.Add(time.Duration(i) * time.Millisecond)}
				th := &Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
				atts := []Attachment{{Filename: "f.txt", ContentType: "text/plain", Disposition: "attachment", Size: 1}}
				if err := s.CreateMessage(ctx, m, atts, th, nil); err != nil {
					b.Fatalf("CreateMessage: %v", err)
				}
			}
		})
	}
}
