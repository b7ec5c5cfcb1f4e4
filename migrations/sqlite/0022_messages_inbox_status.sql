-- 0022: the dashboard's Messages page filtered by inbox and status (issue
-- 32); see the PostgreSQL file. Without statistics (the server never runs
-- ANALYZE) SQLite took messages_status_created_idx the same way: 77–97 ms p95.
CREATE INDEX messages_inbox_status_created_idx ON messages (inbox_id, status, created_at, id);
