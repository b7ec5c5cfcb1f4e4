-- 0010: scheduled and queued sends (issue 19); see the PostgreSQL file.
--
-- SQLite cannot alter a CHECK constraint. Widening one changes nothing on
-- disk (every row already satisfies the wider check), which is the case
-- SQLite's documentation allows to be done by editing the schema text in
-- place (https://sqlite.org/lang_altertable.html, "making other kinds of
-- table schema changes", the simpler procedure), inside this migration's
-- transaction, rather than by copying the table: a copy would drop and
-- recreate messages under its attachments' ON DELETE CASCADE.
PRAGMA writable_schema = ON;
UPDATE sqlite_schema
   SET sql = replace(sql, 'CHECK (status IN (''sending'', ''sent'', ''failed''))',
       'CHECK (status IN (''scheduled'', ''queued'', ''sending'', ''sent'', ''failed'', ''canceled''))')
 WHERE type = 'table' AND name = 'messages';
PRAGMA writable_schema = RESET;

ALTER TABLE messages ADD COLUMN scheduled_at DATETIME;
ALTER TABLE messages ADD COLUMN next_attempt_at DATETIME;

CREATE INDEX messages_lane_idx ON messages (inbox_id, COALESCE(scheduled_at, created_at), id)
    WHERE status = 'queued';
CREATE INDEX messages_held_idx ON messages (status, created_at) WHERE status IN ('scheduled', 'queued');
