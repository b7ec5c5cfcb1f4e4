-- 0022: the dashboard's Messages page filtered by inbox and status (issue
-- 32). With only messages_inbox_created_idx and messages_status_created_idx
-- a prepared statement's generic plan (what a pooled connection runs after
-- five executions) walked messages_status_created_idx newest first,
-- testing every row's inbox: the sent mail of an inbox with none read all
-- 95,000 sent messages of 100,000, 80–89 ms p95 (BENCHMARKS.md section 29).
-- In this index the page is one range in its order, stopped at its LIMIT,
-- whatever the values.
CREATE INDEX messages_inbox_status_created_idx ON messages (inbox_id, status, created_at, id);
