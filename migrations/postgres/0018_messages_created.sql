-- 0018: the dashboard's Messages page (issue 32) lists every message newest
-- first, optionally of one status and between two times, 100 rows at a
-- time. Without an inbox there was no index in that order, so each page
-- sorted the whole table; these two are that order, overall and per status,
-- so a page is read from the index and stops at its LIMIT. (With an inbox,
-- messages_inbox_created_idx already is.)
CREATE INDEX messages_created_idx ON messages (created_at, id);
CREATE INDEX messages_status_created_idx ON messages (status, created_at, id);
