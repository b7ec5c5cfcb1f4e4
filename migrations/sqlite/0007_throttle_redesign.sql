-- 0007: per-inbox windows keyed by the sending address (issue 15): see the
-- PostgreSQL file. SQLite never had a shared throttle; its empty tables go.
ALTER TABLE send_log ADD COLUMN scope TEXT NOT NULL DEFAULT '';
UPDATE send_log SET scope = (SELECT lower(m.from_address) FROM messages m WHERE m.id = send_log.id)
    WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id = send_log.id);
DROP TABLE IF EXISTS throttle_reservations;
DROP TABLE IF EXISTS throttle_counts;
