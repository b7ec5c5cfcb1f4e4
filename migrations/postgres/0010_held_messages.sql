-- 0010: scheduled and queued sends (issue 19). A message may now be held
-- before it is sent: "scheduled" until its scheduled_at, "queued" while its
-- throttle windows are full (next_attempt_at is when room is next expected),
-- or "canceled" by its sender before it went out. River's own tables, which
-- hold the jobs that dispatch them, are migrated by River's migrator right
-- after these files (see the store's Schemas).
ALTER TABLE messages DROP CONSTRAINT messages_status_check;
ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('scheduled', 'queued', 'sending', 'sent', 'failed', 'canceled'));
ALTER TABLE messages ADD COLUMN scheduled_at TIMESTAMPTZ;
ALTER TABLE messages ADD COLUMN next_attempt_at TIMESTAMPTZ;

-- An inbox's lane: its queued messages in the order they became due
-- (a scheduled message joins at its time, a queued one at acceptance).
CREATE INDEX messages_lane_idx ON messages (inbox_id, (COALESCE(scheduled_at, created_at)), id)
    WHERE status = 'queued';
-- GET /v1/messages?status= and the queue metrics.
CREATE INDEX messages_held_idx ON messages (status, created_at) WHERE status IN ('scheduled', 'queued');
