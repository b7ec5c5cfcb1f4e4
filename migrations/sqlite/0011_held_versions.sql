-- 0011: held mail that strands nothing and a 200 that always wins (issue
-- 26); see the PostgreSQL file.
ALTER TABLE messages ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
UPDATE messages SET version = 1 WHERE scheduled_at IS NOT NULL OR next_attempt_at IS NOT NULL
    OR status IN ('scheduled', 'queued', 'canceled');

ALTER TABLE send_log ADD COLUMN waiting BOOLEAN NOT NULL DEFAULT 0;
