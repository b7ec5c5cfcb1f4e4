-- 0013: what happened after the provider (issue 29): delivery events per
-- recipient, and the server's suppression list.
--
-- A delivery event is stored once per provider and provider event id
-- (event_key): a webhook delivered twice changes nothing. Its message is
-- ours (an event about a message we do not know is not stored), and goes
-- with it. messages_provider_id_idx finds the message a provider's event
-- names.
CREATE TABLE delivery_events (
    id           TEXT        PRIMARY KEY,
    message_id   TEXT        NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
    provider     TEXT        NOT NULL,
    event_key    TEXT        NOT NULL,
    type         TEXT        NOT NULL,
    bounce_type  TEXT,
    recipient    TEXT        NOT NULL,
    occurred_at  TIMESTAMPTZ NOT NULL,
    smtp_status  TEXT,
    diagnostic   TEXT,
    created_at   TIMESTAMPTZ NOT NULL,
    UNIQUE (provider, event_key)
);
CREATE INDEX delivery_events_message_idx ON delivery_events (message_id, occurred_at);
-- The 24-hour bounce and complaint rates count events by type and time.
CREATE INDEX delivery_events_type_created_idx ON delivery_events (type, created_at);
CREATE INDEX messages_provider_id_idx ON messages (provider_message_id) WHERE provider_message_id IS NOT NULL;

-- One suppression list for the server. email is the canonical address
-- (core/address Key: the addr-spec, lower case). message_id names the
-- message whose bounce or complaint added it; it outlives that message.
CREATE TABLE suppressions (
    email       TEXT        PRIMARY KEY,
    reason      TEXT        NOT NULL,
    source      TEXT        NOT NULL,
    message_id  TEXT,
    created_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX suppressions_reason_idx ON suppressions (reason, email);

-- Keys every server on this database shares, made at first use: the VERP
-- key of SMTP bounces' return paths (providers/bounce), which must outlive
-- any one server for as long as bounces can arrive.
CREATE TABLE server_keys (
    name        TEXT     PRIMARY KEY,
    value       TEXT     NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL
);
