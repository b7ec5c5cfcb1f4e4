-- 0020: the dashboard's charts (issue 32). Sends by outcome and refusals by
-- reason, counted per minute and per hour, so that the overview reads at
-- most a few hundred rows instead of scanning messages (a refusal leaves no
-- message at all). Each server adds its counts about once a second (an
-- upsert per bucket and kind); the janitor deletes minutes past a day and
-- hours past 30 days. width is 'minute' or 'hour'; kind is a send's outcome
-- (sent, failed, unknown) or a refusal's reason (throttled, domain_blocked,
-- suppressed, validation).
CREATE TABLE send_counts (
    width  TEXT        NOT NULL,
    start  TIMESTAMPTZ NOT NULL,
    kind   TEXT        NOT NULL,
    count  BIGINT      NOT NULL,
    PRIMARY KEY (width, start, kind)
);
