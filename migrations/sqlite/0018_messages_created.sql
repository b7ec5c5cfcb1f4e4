-- 0018: the dashboard's Messages page (issue 32); see the PostgreSQL file.
CREATE INDEX messages_created_idx ON messages (created_at, id);
CREATE INDEX messages_status_created_idx ON messages (status, created_at, id);
