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

-- throttle_reserve admits one send in one round trip: under the admission
-- lock it stamps the database's clock (plus p_offset, 0 but in tests),
-- counts the expired reservations at their deadline, drops buckets out of
-- every window, counts the global windows and p_inbox's (committed and in
-- flight) and, if every limit (0 = none) has room, inserts the reservation.
-- A bucket b of width w counts while b >= floor((now - span) / w), as in
-- the in-memory limiter. The caller computes Retry-After on refusal.
CREATE FUNCTION throttle_reserve(p_offset BIGINT, p_inbox TEXT, p_lease BIGINT,
    p_gmin INTEGER, p_ghour INTEGER, p_imin INTEGER, p_ihour INTEGER,
    OUT admitted BOOLEAN, OUT now_ns BIGINT, OUT res_id BIGINT, OUT g_minute BIGINT, OUT g_hour BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    lo_m BIGINT;
    lo_h BIGINT;
    i_minute BIGINT := 0;
    i_hour BIGINT := 0;
BEGIN
    PERFORM pg_advisory_xact_lock(7957704885311926833); -- "nornthr1"
    now_ns := (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT + p_offset;
    IF EXISTS (SELECT 1 FROM throttle_reservations WHERE deadline_ns <= now_ns) THEN
        WITH gone AS (DELETE FROM throttle_reservations WHERE deadline_ns <= now_ns RETURNING inbox_id, deadline_ns AS t),
        ev AS (SELECT ''::TEXT AS scope, t FROM gone UNION ALL SELECT inbox_id, t FROM gone WHERE inbox_id <> '')
        INSERT INTO throttle_counts (scope, width, bucket, sends)
        SELECT ev.scope, w.w, ev.t / (w.w * 1000000000), count(*) FROM ev CROSS JOIN (VALUES (1::BIGINT), (60::BIGINT)) AS w(w)
        GROUP BY 1, 2, 3
        ON CONFLICT (scope, width, bucket) DO UPDATE SET sends = throttle_counts.sends + EXCLUDED.sends;
    END IF;
    lo_m := (now_ns - 60000000000) / 1000000000;
    lo_h := (now_ns - 3600000000000) / 60000000000;
    -- Old buckets are only skipped below; deleting them now and then
    -- keeps the table small without a delete on every admission.
    IF random() < 0.02 THEN
        DELETE FROM throttle_counts WHERE (width = 1 AND bucket < lo_m) OR (width = 60 AND bucket < lo_h);
    END IF;
    -- One statement, one snapshot: a commit (delete the reservation, count
    -- the send) landing between two reads would be seen by neither.
    WITH c AS (SELECT scope, width, sum(sends) AS n FROM throttle_counts WHERE scope IN ('', p_inbox)
        AND ((width = 1 AND bucket >= lo_m) OR (width = 60 AND bucket >= lo_h)) GROUP BY 1, 2),
    r AS (SELECT count(*) AS g, count(*) FILTER (WHERE inbox_id = p_inbox AND p_inbox <> '') AS i FROM throttle_reservations)
    SELECT coalesce((SELECT n FROM c WHERE scope = '' AND width = 1), 0) + r.g,
           coalesce((SELECT n FROM c WHERE scope = '' AND width = 60), 0) + r.g,
           coalesce((SELECT n FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 1), 0) + r.i,
           coalesce((SELECT n FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 60), 0) + r.i
        INTO g_minute, g_hour, i_minute, i_hour FROM r;
    IF (p_gmin > 0 AND g_minute >= p_gmin) OR (p_ghour > 0 AND g_hour >= p_ghour)
        OR (p_imin > 0 AND i_minute >= p_imin) OR (p_ihour > 0 AND i_hour >= p_ihour) THEN
        admitted := false;
        RETURN;
    END IF;
    INSERT INTO throttle_reservations (inbox_id, deadline_ns) VALUES (p_inbox, now_ns + p_lease) RETURNING id INTO res_id;
    admitted := true;
    g_minute := g_minute + 1;
    g_hour := g_hour + 1;
END
$$;
