-- 0008: the throttle's identity (issue 15, item 3). Servers that do not
-- share one throttle must not run on one database: each records here the
-- throttle it uses (backend, Redis target and prefix, limits), and a server
-- that disagrees with the servers running refuses to start, naming the
-- variable and the value they use. A deliberate change of limits
-- (`nornweave limits set`) moves version, and the running servers pick the
-- new limits up.
CREATE TABLE throttle_identity (
    id                INTEGER     PRIMARY KEY CHECK (id = 1),
    backend           TEXT        NOT NULL,
    redis_target      TEXT        NOT NULL,
    redis_prefix      TEXT        NOT NULL,
    global_per_minute INTEGER     NOT NULL,
    global_per_hour   INTEGER     NOT NULL,
    inbox_per_minute  INTEGER     NOT NULL,
    inbox_per_hour    INTEGER     NOT NULL,
    version           BIGINT      NOT NULL,
    changed_at        TIMESTAMPTZ NOT NULL,
    changed_by        TEXT        NOT NULL
);
