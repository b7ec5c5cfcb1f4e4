-- 0008: the throttle's identity (issue 15, item 3); see the PostgreSQL file.
CREATE TABLE throttle_identity (
    id                INTEGER  PRIMARY KEY CHECK (id = 1),
    backend           TEXT     NOT NULL,
    redis_target      TEXT     NOT NULL,
    redis_prefix      TEXT     NOT NULL,
    global_per_minute INTEGER  NOT NULL,
    global_per_hour   INTEGER  NOT NULL,
    inbox_per_minute  INTEGER  NOT NULL,
    inbox_per_hour    INTEGER  NOT NULL,
    version           INTEGER  NOT NULL,
    changed_at        DATETIME NOT NULL,
    changed_by        TEXT     NOT NULL
);
