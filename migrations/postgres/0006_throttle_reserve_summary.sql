-- 0006: throttle_reserve becomes throttle_reserve_many, which admits the
-- sends several requests of one server asked for at once under one lock
-- and in one round trip, in order, exactly as one call each would. For each
-- admitted send it also reports what the send's rate-limit headers need, so
-- that a 201 costs no second read of the shared state: per scope (global,
-- inbox) and window (minute, hour) the committed sends, the oldest bucket
-- holding one (NULL if none), and the reservations in flight (this one
-- included). The windows are those 0005 judges by.
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

-- throttle_count counts one send per element, at p_times[i] (ns), in the
-- global windows and in those of inbox p_inboxes[i] ('' for none).
CREATE FUNCTION throttle_count(p_inboxes TEXT[], p_times BIGINT[]) RETURNS void LANGUAGE sql AS $$
    WITH s AS (SELECT * FROM unnest(p_inboxes, p_times) AS s(inbox_id, t)),
    ev AS (SELECT ''::TEXT AS scope, t FROM s UNION ALL SELECT inbox_id, t FROM s WHERE inbox_id <> '')
    INSERT INTO throttle_counts (scope, width, bucket, sends)
    SELECT ev.scope, w.w, ev.t / (w.w * 1000000000), count(*) FROM ev CROSS JOIN (VALUES (1::BIGINT), (60::BIGINT)) AS w(w)
    GROUP BY 1, 2, 3
    ON CONFLICT (scope, width, bucket) DO UPDATE SET sends = throttle_counts.sends + EXCLUDED.sends;
$$;

-- throttle_settle counts the reservations p_commit, each p_ago ns before
-- p_now (when its server committed it), and deletes those of p_release: a
-- server's commits and releases, gathered for a few milliseconds so that
-- one statement settles many sends. A reservation already reclaimed (its
-- lease ran out) is not there any more and was counted then.
CREATE FUNCTION throttle_settle(p_now BIGINT, p_commit BIGINT[], p_ago BIGINT[], p_release BIGINT[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    inboxes TEXT[];
    times BIGINT[];
BEGIN
    -- Under the admission lock: two batches upserting the same bucket rows
    -- in different orders (or deleting a reservation an admission is
    -- reclaiming) would deadlock. Batches are few; the wait is short.
    PERFORM pg_advisory_xact_lock(7957704885311926833); -- "nornthr1"
    IF cardinality(p_release) > 0 THEN
        DELETE FROM throttle_reservations WHERE id = ANY (p_release);
    END IF;
    IF cardinality(p_commit) > 0 THEN
        WITH gone AS (DELETE FROM throttle_reservations r USING unnest(p_commit, p_ago) AS c(id, ago)
            WHERE r.id = c.id RETURNING r.inbox_id, p_now - greatest(c.ago, 0) AS t)
        SELECT array_agg(inbox_id), array_agg(t) INTO inboxes, times FROM gone;
        PERFORM throttle_count(inboxes, times);
    END IF;
END
$$;

CREATE FUNCTION throttle_reserve_many(p_offset BIGINT, p_inboxes TEXT[], p_leases BIGINT[],
    p_gmin INTEGER, p_ghour INTEGER, p_imins INTEGER[], p_ihours INTEGER[], p_versions TEXT[])
RETURNS TABLE (admitted BOOLEAN, stale BOOLEAN, now_ns BIGINT, res_id BIGINT,
    g_used_m BIGINT, g_used_h BIGINT, g_old_m BIGINT, g_old_h BIGINT, g_flight BIGINT,
    i_used_m BIGINT, i_used_h BIGINT, i_old_m BIGINT, i_old_h BIGINT, i_flight BIGINT)
LANGUAGE plpgsql AS $$
DECLARE
    lo_m BIGINT;
    lo_h BIGINT;
    version TEXT;
    inbox TEXT;
    read BOOLEAN;
    inboxes TEXT[];
    times BIGINT[];
BEGIN
    PERFORM pg_advisory_xact_lock(7957704885311926833); -- "nornthr1"
    now_ns := (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT + p_offset;
    -- Reservations whose lease ran out (their servers died) count as sent
    -- at their deadlines.
    IF EXISTS (SELECT 1 FROM throttle_reservations WHERE deadline_ns <= now_ns) THEN
        WITH gone AS (DELETE FROM throttle_reservations WHERE deadline_ns <= now_ns RETURNING inbox_id, deadline_ns)
        SELECT array_agg(inbox_id), array_agg(deadline_ns) INTO inboxes, times FROM gone;
        PERFORM throttle_count(inboxes, times);
    END IF;
    lo_m := (now_ns - 60000000000) / 1000000000;
    lo_h := (now_ns - 3600000000000) / 60000000000;
    -- Old buckets are only skipped below; deleting them now and then
    -- keeps the table small without a delete on every admission.
    IF random() < 0.02 THEN
        DELETE FROM throttle_counts WHERE (width = 1 AND bucket < lo_m) OR (width = 60 AND bucket < lo_h);
    END IF;
    version := (SELECT v::TEXT FROM inbox_version);
    -- The global scope once; every admission below adds one in flight.
    -- Counts and reservations in one statement, so one snapshot: a commit
    -- landing between two reads would be seen by neither. (Commits take
    -- the lock now, but a reader must not depend on it.)
    SELECT c.um, c.uh, c.om, c.oh, r.n INTO g_used_m, g_used_h, g_old_m, g_old_h, g_flight
        FROM (SELECT coalesce(sum(sends) FILTER (WHERE width = 1), 0) AS um,
                     coalesce(sum(sends) FILTER (WHERE width = 60), 0) AS uh,
                     min(bucket) FILTER (WHERE width = 1 AND sends > 0) AS om,
                     min(bucket) FILTER (WHERE width = 60 AND sends > 0) AS oh
              FROM throttle_counts WHERE scope = '' AND ((width = 1 AND bucket >= lo_m) OR (width = 60 AND bucket >= lo_h))) c,
             (SELECT count(*) AS n FROM throttle_reservations) r;
    FOR k IN 1 .. coalesce(array_length(p_inboxes, 1), 0) LOOP
        res_id := NULL;
        -- '' is a copy read just now: nothing to check.
        stale := p_versions[k] <> '' AND p_versions[k] IS DISTINCT FROM version;
        admitted := false;
        IF k = 1 OR p_inboxes[k] IS DISTINCT FROM inbox THEN
            -- The caller sends an inbox's requests together: its scope is
            -- read once, and each admission below adds one in flight.
            inbox := p_inboxes[k];
            read := false;
            i_used_m := 0; i_used_h := 0; i_old_m := NULL; i_old_h := NULL; i_flight := 0;
        END IF;
        IF NOT stale THEN
            IF inbox <> '' AND NOT read THEN
                read := true;
                -- One statement, as above.
                SELECT c.um, c.uh, c.om, c.oh, r.n INTO i_used_m, i_used_h, i_old_m, i_old_h, i_flight
                    FROM (SELECT coalesce(sum(sends) FILTER (WHERE width = 1), 0) AS um,
                                 coalesce(sum(sends) FILTER (WHERE width = 60), 0) AS uh,
                                 min(bucket) FILTER (WHERE width = 1 AND sends > 0) AS om,
                                 min(bucket) FILTER (WHERE width = 60 AND sends > 0) AS oh
                          FROM throttle_counts WHERE scope = inbox
                              AND ((width = 1 AND bucket >= lo_m) OR (width = 60 AND bucket >= lo_h))) c,
                         (SELECT count(*) AS n FROM throttle_reservations WHERE inbox_id = inbox) r;
            END IF;
            admitted := NOT ((p_gmin > 0 AND g_used_m + g_flight >= p_gmin) OR (p_ghour > 0 AND g_used_h + g_flight >= p_ghour)
                OR (p_imins[k] > 0 AND i_used_m + i_flight >= p_imins[k]) OR (p_ihours[k] > 0 AND i_used_h + i_flight >= p_ihours[k]));
            IF admitted THEN
                INSERT INTO throttle_reservations (inbox_id, deadline_ns) VALUES (inbox, now_ns + p_leases[k]) RETURNING id INTO res_id;
                g_flight := g_flight + 1;
                IF inbox <> '' THEN
                    i_flight := i_flight + 1;
                END IF;
            END IF;
        END IF;
        RETURN NEXT;
    END LOOP;
END
$$;
