-- 0002: the throttle's own record of sends, and idempotency keys.
--
-- send_log is what the throttle is rebuilt from at start-up. It has no
-- foreign key on purpose: deleting an inbox (which cascades to its
-- messages) must not erase the sends that still count against the limit.
-- A row is written with the message, in flight; when the provider answers it
-- is marked counted (the send went out, or may have) or deleted (it
-- certainly failed). Rows are pruned once they are older than every window.
CREATE TABLE send_log (
    id          TEXT PRIMARY KEY,            -- the message id
    inbox_id    TEXT NOT NULL,
    reserved_at TIMESTAMPTZ NOT NULL,
    -- the latest moment the send can go out: a send a crash left in flight
    -- is counted at this moment (or at the restart, if sooner)
    deadline    TIMESTAMPTZ NOT NULL,
    counted_at  TIMESTAMPTZ                  -- NULL while in flight
);

CREATE INDEX send_log_counted_idx ON send_log (counted_at);

-- Idempotency-Key of POST /v1/messages. A row without a status is a
-- request in flight, claimed by the server process named in owner.
CREATE TABLE idempotency_keys (
    key           TEXT PRIMARY KEY,
    request_hash  TEXT NOT NULL,
    owner         TEXT NOT NULL,
    message_id    TEXT NOT NULL,
    status_code   INTEGER,
    response_body TEXT,
    created_at    TIMESTAMPTZ NOT NULL
);

CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
