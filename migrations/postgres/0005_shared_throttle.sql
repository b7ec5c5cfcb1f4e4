-- 0005: the throttle's shared state for THROTTLE_BACKEND=postgres (issue 11).
-- Sends counted per bucket of each window, and the reservations in flight,
-- all stamped by the database's clock in nanoseconds since the Unix epoch.
-- scope is '' for the global windows, else an inbox id; width is the bucket
-- width in seconds: 1 for the minute window, 60 for the hour window.
CREATE TABLE throttle_counts (
    scope  TEXT    NOT NULL,
    width  BIGINT  NOT NULL,
    bucket BIGINT  NOT NULL,
    sends  INTEGER NOT NULL,
    PRIMARY KEY (scope, width, bucket)
);
-- A reservation is the record of a send in flight: when deadline_ns passes
-- without a commit or release (its server died), any server counts it at
-- deadline_ns and deletes it.
CREATE TABLE throttle_reservations (
    id          BIGSERIAL PRIMARY KEY,
    inbox_id    TEXT   NOT NULL,
    deadline_ns BIGINT NOT NULL
);
CREATE INDEX throttle_reservations_inbox ON throttle_reservations (inbox_id);
CREATE INDEX throttle_reservations_deadline ON throttle_reservations (deadline_ns);
