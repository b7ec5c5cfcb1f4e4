-- 0017: the dashboard's Held page (issue 32) lists the held mail per inbox,
-- the queued lane first in the order the lane sends it, then the scheduled
-- mail by its time, 200 rows at a time. This index is that order, so a page
-- is read from the index and stops at its LIMIT, instead of sorting every
-- held message for each page.
CREATE INDEX messages_held_page_idx ON messages (inbox_id, status, (COALESCE(scheduled_at, created_at)), id)
    WHERE status IN ('scheduled', 'queued');
