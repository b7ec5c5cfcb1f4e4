-- Issue 31: recipients as the throttle's unit, and a per-day window.
-- cost is the units a send took from the throttle: 1 for a message, or its
-- unique recipients under THROTTLE_UNIT=recipient; a restart counts it
-- again with that weight. Rows written before this migration were messages.
ALTER TABLE send_log ADD COLUMN cost INTEGER NOT NULL DEFAULT 1;
-- An inbox's own limit for a rolling 24 h; NULL takes the default.
ALTER TABLE inboxes ADD COLUMN rate_limit_per_day INTEGER;
