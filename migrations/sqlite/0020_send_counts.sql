-- 0020: the dashboard's charts (issue 32); see the PostgreSQL file.
CREATE TABLE send_counts (
    width  TEXT     NOT NULL,
    start  DATETIME NOT NULL,
    kind   TEXT     NOT NULL,
    count  INTEGER  NOT NULL,
    PRIMARY KEY (width, start, kind)
);
