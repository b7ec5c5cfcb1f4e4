-- 0021: a message's throttle decision and attempts (issue 32); see the
-- PostgreSQL file.
ALTER TABLE messages ADD COLUMN throttle_refusal TEXT;
ALTER TABLE messages ADD COLUMN throttle_admission TEXT;
ALTER TABLE messages ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
