-- 0016: the second and the day in the throttle's identity (issue 31). The
-- shared backends keep them now, so servers that share one must agree on
-- GLOBAL_SEND_RATE_LIMIT_PER_SECOND, GLOBAL_SEND_RATE_LIMIT_PER_DAY and
-- INBOX_SEND_RATE_LIMIT_PER_DAY as on the minute and the hour, and
-- `nornweave limits set` changes them. Rows recorded before read 0
-- (unlimited): what those servers ran with, as a shared backend refused
-- any other value.
ALTER TABLE throttle_identity ADD COLUMN global_per_second INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN global_per_day    INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN inbox_per_day     INTEGER NOT NULL DEFAULT 0;
