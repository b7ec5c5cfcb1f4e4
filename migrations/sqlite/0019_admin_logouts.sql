-- 0019: the dashboard's logouts (issue 32); see the PostgreSQL file.
CREATE TABLE admin_logouts (
    id          TEXT     PRIMARY KEY,
    expires_at  DATETIME NOT NULL
);
CREATE INDEX admin_logouts_expires_idx ON admin_logouts (expires_at);
