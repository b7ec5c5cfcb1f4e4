-- 0007: the throttle in a package tree of its own (issue 16) and per-inbox
-- windows keyed by the sending address (issue 15).
--
-- send_log.scope is the key of a send's inbox windows: the inbox's address,
-- so that deleting an inbox and creating it again with the same address
-- does not give it a fresh quota. Rows from before are keyed by the address
-- their message was sent from, where the message still exists.
ALTER TABLE send_log ADD COLUMN scope TEXT NOT NULL DEFAULT '';
UPDATE send_log l SET scope = lower(m.from_address) FROM messages m WHERE m.id = l.id;

-- The shared PostgreSQL throttle's state now belongs to package pgthrottle
-- (its own tables and functions, applied by its Migrate); the first use
-- rebuilds it from send_log. What 0005 and 0006 made for it goes, with the
-- inbox-version layer.
DROP TRIGGER IF EXISTS inboxes_changed ON inboxes;
DROP FUNCTION IF EXISTS inbox_version_bump();
DROP TABLE IF EXISTS inbox_version;
DROP FUNCTION IF EXISTS throttle_reserve_many(BIGINT, TEXT[], BIGINT[], INTEGER, INTEGER, INTEGER[], INTEGER[], TEXT[]);
DROP FUNCTION IF EXISTS throttle_settle(BIGINT, BIGINT[], BIGINT[], BIGINT[]);
DROP FUNCTION IF EXISTS throttle_count(TEXT[], BIGINT[]);
DROP TABLE IF EXISTS throttle_reservations;
DROP TABLE IF EXISTS throttle_counts;
