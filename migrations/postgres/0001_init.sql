-- 0001: the outbound schema. Ids are TEXT, not UUID, because clients send
-- arbitrary strings as ids and an id that is not a UUID must simply not be
-- found rather than fail with a type error.

CREATE TABLE inboxes (
    id            TEXT PRIMARY KEY,
    email_address TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL
);

CREATE TABLE threads (
    id               TEXT PRIMARY KEY,
    inbox_id         TEXT NOT NULL REFERENCES inboxes (id) ON DELETE CASCADE,
    subject          TEXT NOT NULL,
    summary          TEXT,
    participant_hash TEXT NOT NULL,
    last_message_at  TIMESTAMPTZ NOT NULL,
    created_at       TIMESTAMPTZ NOT NULL
);

-- GET /v1/threads?inbox_id=: newest activity first.
CREATE INDEX threads_inbox_last_message_idx ON threads (inbox_id, last_message_at DESC);

CREATE TABLE messages (
    id                  TEXT PRIMARY KEY,
    thread_id           TEXT NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
    inbox_id            TEXT NOT NULL REFERENCES inboxes (id) ON DELETE CASCADE,
    direction           TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('sending', 'sent', 'failed')),
    error               TEXT,
    provider_message_id TEXT,
    message_id_header   TEXT NOT NULL,
    in_reply_to         TEXT,
    -- JSON arrays and objects are kept as TEXT so both dialects store them alike.
    references_header   TEXT NOT NULL DEFAULT '[]',
    subject             TEXT NOT NULL,
    from_address        TEXT NOT NULL,
    to_addresses        TEXT NOT NULL DEFAULT '[]',
    cc_addresses        TEXT NOT NULL DEFAULT '[]',
    bcc_addresses       TEXT NOT NULL DEFAULT '[]',
    reply_to_addresses  TEXT NOT NULL DEFAULT '[]',
    labels              TEXT NOT NULL DEFAULT '[]',
    metadata            TEXT NOT NULL DEFAULT '{}',
    body_text           TEXT NOT NULL DEFAULT '',
    body_html           TEXT NOT NULL DEFAULT '',
    size                BIGINT NOT NULL DEFAULT 0,
    created_at          TIMESTAMPTZ NOT NULL,
    sent_at             TIMESTAMPTZ
);

-- GET /v1/messages?inbox_id=: newest first.
CREATE INDEX messages_inbox_created_idx ON messages (inbox_id, created_at DESC);
-- A thread's messages in order, and its newest one for replies.
CREATE INDEX messages_thread_created_idx ON messages (thread_id, created_at);
-- Restoring the send throttle at start-up.
CREATE INDEX messages_status_sent_idx ON messages (status, sent_at);

CREATE TABLE attachments (
    id           TEXT PRIMARY KEY,
    message_id   TEXT NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    filename     TEXT NOT NULL,
    content_type TEXT NOT NULL,
    disposition  TEXT NOT NULL,
    content_id   TEXT,
    size         BIGINT NOT NULL DEFAULT 0,
    created_at   TIMESTAMPTZ NOT NULL
);

-- Without it the cascade from messages scans the whole table.
CREATE INDEX attachments_message_idx ON attachments (message_id);
