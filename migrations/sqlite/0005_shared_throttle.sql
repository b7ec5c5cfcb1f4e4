-- 0005: the tables of THROTTLE_BACKEND=postgres (issue 11). SQLite is one
-- server's database and always uses the in-memory throttle; the tables keep
-- both dialects at the same schema version.
CREATE TABLE throttle_counts (
    scope  TEXT    NOT NULL,
    width  INTEGER NOT NULL,
    bucket INTEGER NOT NULL,
    sends  INTEGER NOT NULL,
    PRIMARY KEY (scope, width, bucket)
);
CREATE TABLE throttle_reservations (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    inbox_id    TEXT    NOT NULL,
    deadline_ns INTEGER NOT NULL
);
