-- 0017: the dashboard's Held page (issue 32); see the PostgreSQL file.
CREATE INDEX messages_held_page_idx ON messages (inbox_id, status, COALESCE(scheduled_at, created_at), id)
    WHERE status IN ('scheduled', 'queued');
