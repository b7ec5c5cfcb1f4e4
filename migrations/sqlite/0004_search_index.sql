-- 0004: a full-text index for search (POST /v1/search, GET /v1/messages?q=).
-- Search promises a case-insensitive SUBSTRING of subject, body or from, so
-- the index is FTS5 with the trigram tokenizer: a quoted phrase of three or
-- more characters matches exactly the rows that contain it as a substring,
-- without reading the bodies. Shorter queries cannot use trigrams and are
-- answered by a scan (bounded by the search timeout).
--
-- External content: the index points at messages by rowid and stores no copy
-- of the text; the triggers keep it in step with every write, including the
-- deletes that cascade from inboxes and threads.

CREATE VIRTUAL TABLE messages_fts USING fts5(
    subject, body_text, from_address,
    content = 'messages', tokenize = 'trigram'
);

INSERT INTO messages_fts (messages_fts) VALUES ('rebuild');

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts (rowid, subject, body_text, from_address)
    VALUES (new.rowid, new.subject, new.body_text, new.from_address);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, subject, body_text, from_address)
    VALUES ('delete', old.rowid, old.subject, old.body_text, old.from_address);
END;

-- Only the indexed columns: recording a send's outcome must not rewrite the index.
CREATE TRIGGER messages_fts_update AFTER UPDATE OF subject, body_text, from_address ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, subject, body_text, from_address)
    VALUES ('delete', old.rowid, old.subject, old.body_text, old.from_address);
    INSERT INTO messages_fts (rowid, subject, body_text, from_address)
    VALUES (new.rowid, new.subject, new.body_text, new.from_address);
END;
