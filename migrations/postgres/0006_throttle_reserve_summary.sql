-- 0006: throttle_reserve also reports what an admitted send's rate-limit
-- headers need, so that a 201 costs no second read of the shared state:
-- per scope (global, inbox) and window (minute, hour) the committed sends,
-- the oldest bucket holding one (NULL if none), and the reservations in
-- flight (this one included). The windows are those 0005 judges by.
--
-- And it checks the caller's copy of the inbox: servers sharing the throttle
-- cache inboxes, and a copy read before another server changed an inbox's
-- limits (or deleted it) must not be judged by. inbox_version counts every
-- change to inboxes, in the changing transaction (a trigger, so a change
-- made in SQL by hand counts too); a caller passes the version its copy was
-- read at and is answered stale (not admitted, nothing taken) if it moved.
DROP FUNCTION throttle_reserve(BIGINT, TEXT, BIGINT, INTEGER, INTEGER, INTEGER, INTEGER);

CREATE TABLE inbox_version (v BIGINT NOT NULL);
INSERT INTO inbox_version (v) VALUES (0);

CREATE FUNCTION inbox_version_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE inbox_version SET v = v + 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER inboxes_changed AFTER UPDATE OR DELETE ON inboxes
    FOR EACH STATEMENT EXECUTE FUNCTION inbox_version_bump();

CREATE FUNCTION throttle_reserve(p_offset BIGINT, p_inbox TEXT, p_lease BIGINT,
    p_gmin INTEGER, p_ghour INTEGER, p_imin INTEGER, p_ihour INTEGER, p_version TEXT,
    OUT admitted BOOLEAN, OUT stale BOOLEAN, OUT now_ns BIGINT, OUT res_id BIGINT,
    OUT g_used_m BIGINT, OUT g_used_h BIGINT, OUT g_old_m BIGINT, OUT g_old_h BIGINT, OUT g_flight BIGINT,
    OUT i_used_m BIGINT, OUT i_used_h BIGINT, OUT i_old_m BIGINT, OUT i_old_h BIGINT, OUT i_flight BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    lo_m BIGINT;
    lo_h BIGINT;
BEGIN
    -- '' is a copy read just now: nothing to check.
    IF p_version <> '' AND p_version IS DISTINCT FROM (SELECT v::TEXT FROM inbox_version) THEN
        admitted := false;
        stale := true;
        RETURN;
    END IF;
    stale := false;
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
    WITH c AS (SELECT scope, width, sum(sends) AS n, min(bucket) FILTER (WHERE sends > 0) AS o
        FROM throttle_counts WHERE scope IN ('', p_inbox)
        AND ((width = 1 AND bucket >= lo_m) OR (width = 60 AND bucket >= lo_h)) GROUP BY 1, 2),
    r AS (SELECT count(*) AS g, count(*) FILTER (WHERE inbox_id = p_inbox AND p_inbox <> '') AS i FROM throttle_reservations)
    SELECT coalesce((SELECT n FROM c WHERE scope = '' AND width = 1), 0),
           coalesce((SELECT n FROM c WHERE scope = '' AND width = 60), 0),
           (SELECT o FROM c WHERE scope = '' AND width = 1),
           (SELECT o FROM c WHERE scope = '' AND width = 60),
           r.g,
           coalesce((SELECT n FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 1), 0),
           coalesce((SELECT n FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 60), 0),
           (SELECT o FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 1),
           (SELECT o FROM c WHERE scope = p_inbox AND p_inbox <> '' AND width = 60),
           r.i
        INTO g_used_m, g_used_h, g_old_m, g_old_h, g_flight, i_used_m, i_used_h, i_old_m, i_old_h, i_flight FROM r;
    IF (p_gmin > 0 AND g_used_m + g_flight >= p_gmin) OR (p_ghour > 0 AND g_used_h + g_flight >= p_ghour)
        OR (p_imin > 0 AND i_used_m + i_flight >= p_imin) OR (p_ihour > 0 AND i_used_h + i_flight >= p_ihour) THEN
        admitted := false;
        RETURN;
    END IF;
    INSERT INTO throttle_reservations (inbox_id, deadline_ns) VALUES (p_inbox, now_ns + p_lease) RETURNING id INTO res_id;
    admitted := true;
    g_flight := g_flight + 1;
    IF p_inbox <> '' THEN
        i_flight := i_flight + 1;
    END IF;
END
$$;
