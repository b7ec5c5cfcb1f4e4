-- 0019: the dashboard's logouts (issue 32). A session cookie is signed, not
-- stored; logging out records its id here until the cookie would have
-- expired, so that a copy of it is refused by every server on the database
-- and after a restart. The janitor deletes the rows past expires_at.
CREATE TABLE admin_logouts (
    id          TEXT        PRIMARY KEY,
    expires_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX admin_logouts_expires_idx ON admin_logouts (expires_at);
