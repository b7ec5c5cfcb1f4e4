-- 0003: an inbox's own send limits, overriding INBOX_SEND_RATE_LIMIT_PER_*.
-- NULL = the default; 0 = unlimited.
ALTER TABLE inboxes ADD COLUMN rate_limit_per_minute INTEGER;
ALTER TABLE inboxes ADD COLUMN rate_limit_per_hour INTEGER;
