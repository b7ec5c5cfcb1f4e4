-- 0012: one identity per throttle backend, and the settings that change
-- what another server may assume (issue 27); see the PostgreSQL file.
ALTER TABLE throttle_identity ADD COLUMN backend_identity       TEXT    NOT NULL DEFAULT '';
ALTER TABLE throttle_identity ADD COLUMN send_timeout_ms        INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN send_retry_deadline_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN throttle_fail          TEXT    NOT NULL DEFAULT '';
ALTER TABLE throttle_identity ADD COLUMN attachment_max_total_size_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN body_max_size_mb             INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN html_max_size_mb             INTEGER NOT NULL DEFAULT 0;
