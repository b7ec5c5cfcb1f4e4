-- 0009: attachments keep their content (issue 20, item 14), served by
-- GET /v1/attachments/{id}/content. Rows written before have none
-- (content and content_hash NULL).
--
-- inbox_id and thread_id are the message's, copied: a message never moves,
-- and listing an inbox's or a thread's attachments then reads this table's
-- own index instead of walking every message of the inbox. position is the
-- attachment's place in its message, so that they list in the order sent.
ALTER TABLE attachments ADD COLUMN inbox_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN thread_id TEXT NOT NULL DEFAULT '';
ALTER TABLE attachments ADD COLUMN position INTEGER NOT NULL DEFAULT 0;
-- SHA-256 of content, hex; NULL when the content was not kept.
ALTER TABLE attachments ADD COLUMN content_hash TEXT;
-- Last, as in the SQLite file. Out of line (TOAST): reading a description
-- does not read the content.
ALTER TABLE attachments ADD COLUMN content BYTEA;

UPDATE attachments SET
    inbox_id = (SELECT m.inbox_id FROM messages m WHERE m.id = attachments.message_id),
    thread_id = (SELECT m.thread_id FROM messages m WHERE m.id = attachments.message_id);

-- GET /v1/attachments?inbox_id=: newest first; ?thread_id=: oldest first.
CREATE INDEX attachments_inbox_created_idx ON attachments (inbox_id, created_at DESC);
CREATE INDEX attachments_thread_created_idx ON attachments (thread_id, created_at);
