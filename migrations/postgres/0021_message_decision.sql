-- 0021: a message's throttle decision and attempts, for the dashboard's
-- message page (issue 32). throttle_refusal is the refusal that queued a
-- send (its full windows and Retry-After), throttle_admission the windows
-- when its slot was settled; both JSON, NULL when there was none.
-- attempts counts the provider calls made for the message, retries and
-- the dispatches of held mail included. ADD COLUMN with a constant
-- default rewrites nothing (PostgreSQL 11+).
ALTER TABLE messages ADD COLUMN throttle_refusal TEXT;
ALTER TABLE messages ADD COLUMN throttle_admission TEXT;
ALTER TABLE messages ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
