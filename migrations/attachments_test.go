package migrations

import (
	"context"
	"database/sql"
	"testing"
)

// 0009 gives the attachments sent before it their message's inbox and
// thread, and no content.
func TestAttachmentContentMigrationFillsOldRows(t *testing.T) {
	t.Parallel()
	forEachDialect(t, func(t *testing.T, dialect string, open func() *sql.DB) {
		ctx := context.Background()
		db := open()
		ms, err := load(dialect)
		if err != nil {
			t.Fatal(err)
		}
		before := ms[:0]
		for _, m := range ms {
			if m.version < 9 {
				before = append(before, m)
			}
		}
		if _, err := apply(ctx, db, dialect, before); err != nil {
			t.Fatalf("apply up to 0008: %v", err)
		}
		for _, q := range []string{
			`INSERT INTO inboxes (id, email_address, name, created_at, updated_at)
				VALUES ('i', 'a@example.com', 'A', '2025-03-01 12:00:00', '2025-03-01 12:00:00')`,
			`INSERT INTO threads (id, inbox_id, subject, participant_hash, last_message_at, created_at)
				VALUES ('t', 'i', 's', 'h', '2025-03-01 12:00:00', '2025-03-01 12:00:00')`,
			`INSERT INTO messages (id, thread_id, inbox_id, direction, status, message_id_header, subject,
				from_address, created_at) VALUES ('m', 't', 'i', 'outbound', 'sent', '<m@x>', 's', 'a@example.com',
				'2025-03-01 12:00:00')`,
			`INSERT INTO attachments (id, message_id, filename, content_type, disposition, size, created_at)
				VALUES ('a', 'm', 'f.txt', 'text/plain', 'attachment', 3, '2025-03-01 12:00:00')`,
		} {
			if _, err := db.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		if _, err := apply(ctx, db, dialect, ms); err != nil {
			t.Fatalf("apply 0009: %v", err)
		}
		var inbox, thread string
		var position int
		var hash sql.NullString
		var content []byte
		err = db.QueryRowContext(ctx, `SELECT inbox_id, thread_id, position, content_hash, content
			FROM attachments WHERE id = 'a'`).Scan(&inbox, &thread, &position, &hash, &content)
		if err != nil {
			t.Fatal(err)
		}
		if inbox != "i" || thread != "t" || position != 0 || hash.Valid || content != nil {
			t.Errorf("got inbox %q thread %q position %d hash %v content %q, want i, t, 0 and no content",
				inbox, thread, position, hash, content)
		}
	})
}
