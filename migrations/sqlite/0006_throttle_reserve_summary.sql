-- 0006: PostgreSQL's throttle_reserve reports more (issue 11). SQLite has no
-- shared throttle; this keeps both dialects at the same schema version.
SELECT 1;
