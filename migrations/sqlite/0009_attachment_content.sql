-- 0009: attachments keep their content (issue 20, item 14); see the
-- PostgreSQL file.
ALTER TABLE attachments ADD COLUMN inbox_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attachments ADD COLUMN content_hash TEXT;
-- Last: SQLite stores a row's columns in order, and a large BLOB spills
-- into overflow pages, so a column after it would be read by walking the
-- whole content. Before it, a description is read from the row's first page.
ALTER TABLE attachments ADD COLUMN content BLOB;

UPDATE attachments SET
    inbox_id = (SELECT m.inbox_id FROM messages m WHERE m.id = attachments.message_id),
    thread_id = (SELECT m.thread_id FROM messages m WHERE m.id = attachments.message_id);

CREATE INDEX attachments_inbox_created_idx ON attachments (inbox_id, created_at DESC);
CREATE INDEX attachments_thread_created_idx ON attachments (thread_id, created_at);
