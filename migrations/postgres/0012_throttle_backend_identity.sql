-- 0012: one identity per throttle backend, and the settings that change
-- what another server may assume (issue 27).
--
-- backend_identity is the random identity the backend itself keeps (a
-- Redis key, a pgthrottle row): servers share a throttle when they see the
-- same one, however REDIS_URL spells it; redis_target stays for the
-- messages. send_timeout_ms and send_retry_deadline_ms make every send's
-- lease, which another server waits out, and the three size limits make
-- the longest one (an Idempotency-Key's claim, held mail's rescue);
-- throttle_fail says whether a
-- server sends when the backend cannot be asked. A server that disagrees
-- on any of them with the servers running refuses to start. Rows recorded
-- before have none: the next server alone on the database records them.
ALTER TABLE throttle_identity ADD COLUMN backend_identity       TEXT   NOT NULL DEFAULT '';
ALTER TABLE throttle_identity ADD COLUMN send_timeout_ms        BIGINT NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN send_retry_deadline_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN throttle_fail          TEXT   NOT NULL DEFAULT '';
ALTER TABLE throttle_identity ADD COLUMN attachment_max_total_size_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN body_max_size_mb             INTEGER NOT NULL DEFAULT 0;
ALTER TABLE throttle_identity ADD COLUMN html_max_size_mb             INTEGER NOT NULL DEFAULT 0;
