-- pgthrottle's schema: the state of THROTTLE_BACKEND=postgres, all stamped
-- by the database's clock in nanoseconds since the Unix epoch. Applied by
-- Migrate, whole, whenever its version moves; every statement is safe to
-- run again.
--
-- The window rule, as the in-memory limiter's rings keep it: a bucket b of
-- width w counts while b >= floor((now - span) / w); a window is
-- full when its counted sends plus the reservations in flight reach a
-- non-zero limit; a reservation past its deadline counts as a send made at
-- its deadline. The Go side evaluates the state these functions read, in
-- the same statement, for every number a client sees.

-- Sends counted per bucket. scope is '' for the global windows, else the
-- sending inbox's address; width_ms is the bucket's width in milliseconds:
-- 100 (the second window), 1000 (the minute), 60000 (the hour) or 900000
-- (the day); bucket is floor(ns / width): the index the Go side reads.
CREATE TABLE IF NOT EXISTS pgthrottle_buckets (
    scope    TEXT    NOT NULL,
    width_ms BIGINT  NOT NULL,
    bucket   BIGINT  NOT NULL,
    sends    INTEGER NOT NULL,
    PRIMARY KEY (scope, width_ms, bucket)
);

-- Versions before 5 kept the width in seconds (1 and 60), which 100 ms
-- does not fit. Once, while the column still has its old name, the rows
-- are converted in place, not dropped: the same buckets, their widths in
-- ms. The second and the day did not exist; they are filled from the
-- buckets kept, on the safe side: a second's sends count in its last
-- 100 ms bucket (they leave no sooner than they did), a minute's in the
-- 15 minutes that hold it (exactly). The day holds only what the backend
-- kept, the last hour: a deployment that starts counting the day on a
-- shared backend counts it from there. An UPDATE is not a DELETE: the
-- guard below does not fire.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM information_schema.columns
               WHERE table_schema = current_schema() AND table_name = 'pgthrottle_buckets' AND column_name = 'width') THEN
        ALTER TABLE pgthrottle_buckets RENAME COLUMN width TO width_ms;
        UPDATE pgthrottle_buckets SET width_ms = width_ms * 1000;
        INSERT INTO pgthrottle_buckets (scope, width_ms, bucket, sends)
        SELECT b.scope, 100, b.bucket * 10 + 9, b.sends FROM pgthrottle_buckets b WHERE b.width_ms = 1000
        UNION ALL
        SELECT b.scope, 900000, b.bucket / 15, sum(b.sends) FROM pgthrottle_buckets b WHERE b.width_ms = 60000
            GROUP BY b.scope, b.bucket / 15;
    END IF;
END
$$;

-- A reservation in flight, of n slots (one send, or a block of spares;
-- each commit or release takes one): when deadline_ns passes with slots
-- left (its server died), the next admission counts each at deadline_ns.
CREATE TABLE IF NOT EXISTS pgthrottle_flights (
    id          BIGSERIAL PRIMARY KEY,
    scope       TEXT   NOT NULL,
    deadline_ns BIGINT NOT NULL
);
ALTER TABLE pgthrottle_flights ADD COLUMN IF NOT EXISTS n INTEGER NOT NULL DEFAULT 1;
CREATE INDEX IF NOT EXISTS pgthrottle_flights_scope ON pgthrottle_flights (scope);
CREATE INDEX IF NOT EXISTS pgthrottle_flights_deadline ON pgthrottle_flights (deadline_ns);

-- One row while the state is present. Without it (a new database, or the
-- tables emptied by hand) nothing is admitted until the state is rebuilt
-- from the send record (pgthrottle_restore). lost names what was found
-- deleted or truncated (version 4): the state is there only in part, and
-- is rebuilt as if lost.
CREATE TABLE IF NOT EXISTS pgthrottle_present (present BOOLEAN PRIMARY KEY);
ALTER TABLE pgthrottle_present ADD COLUMN IF NOT EXISTS lost TEXT;

-- A row deleted, or a table truncated, by anything but these functions
-- would read as "no sends": the guard records it in pgthrottle_present,
-- so that the next admission rebuilds the state from the send record.
-- The functions mark their own deletes with the transaction-local setting
-- pgthrottle.own, and clear it before they return.
CREATE OR REPLACE FUNCTION pgthrottle_guard() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('pgthrottle.own', true) IS DISTINCT FROM 'on' THEN
        UPDATE pgthrottle_present SET lost = coalesce(lost, 'rows of ' || TG_TABLE_NAME || ' (a ' || TG_OP || ' from outside pgthrottle)');
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS pgthrottle_buckets_guard ON pgthrottle_buckets;
CREATE TRIGGER pgthrottle_buckets_guard AFTER DELETE OR TRUNCATE ON pgthrottle_buckets
    FOR EACH STATEMENT EXECUTE FUNCTION pgthrottle_guard();
DROP TRIGGER IF EXISTS pgthrottle_flights_guard ON pgthrottle_flights;
CREATE TRIGGER pgthrottle_flights_guard AFTER DELETE OR TRUNCATE ON pgthrottle_flights
    FOR EACH STATEMENT EXECUTE FUNCTION pgthrottle_guard();

-- pgthrottle_check raises SQLSTATE NWT01 when the state is lost and NWT02
-- (with what is missing) when it is incomplete; else it is true.
CREATE OR REPLACE FUNCTION pgthrottle_check() RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    l TEXT;
BEGIN
    SELECT p.lost INTO l FROM pgthrottle_present p;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'throttle state lost' USING ERRCODE = 'NWT01';
    ELSIF l IS NOT NULL THEN
        RAISE EXCEPTION '%', l USING ERRCODE = 'NWT02';
    END IF;
    RETURN true;
END
$$;

-- pgthrottle_count counts one send per element, at p_times[i] (ns), in
-- every window of the global scope and of p_scopes[i] ('' for none).
--
-- This and pgthrottle_scope are PL/pgSQL, not SQL, for speed: PostgreSQL
-- before 18 plans a SQL function's body again on every call it cannot
-- inline (0.5 ms here), where PL/pgSQL keeps its plans for the session.
CREATE OR REPLACE FUNCTION pgthrottle_count(p_scopes TEXT[], p_times BIGINT[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    WITH s AS (SELECT * FROM unnest(p_scopes, p_times) AS s(scope, t)),
    ev AS (SELECT ''::TEXT AS scope, s.t FROM s UNION ALL SELECT s.scope, s.t FROM s WHERE s.scope <> '')
    INSERT INTO pgthrottle_buckets AS pb (scope, width_ms, bucket, sends)
    SELECT ev.scope, w.w, ev.t / (w.w * 1000000), count(*) FROM ev
        CROSS JOIN (VALUES (100::BIGINT), (1000::BIGINT), (60000::BIGINT), (900000::BIGINT)) AS w(w)
    GROUP BY 1, 2, 3
    ON CONFLICT (scope, width_ms, bucket) DO UPDATE SET sends = pb.sends + EXCLUDED.sends;
END
$$;

-- pgthrottle_scope reads one scope ('' for the global one) at bucket
-- bounds p_lo_s, p_lo_m, p_lo_h and p_lo_d (second, minute, hour, day):
-- its buckets still inside each window with their sends and the sums, and
-- its reservations (every one, for the global scope) with their slots, and
-- the slots' sum. STABLE and one statement: it reads in its caller's
-- snapshot. (Version 3 added the slots, version 5 the second and the day:
-- the functions of the versions before are dropped first, as their
-- results changed.)
DROP FUNCTION IF EXISTS pgthrottle_scope(TEXT, BIGINT, BIGINT);
DROP FUNCTION IF EXISTS pgthrottle_reserve(TEXT[], BIGINT[], INTEGER, INTEGER, INTEGER[], INTEGER[]);
DROP FUNCTION IF EXISTS pgthrottle_reserve(TEXT[], BIGINT[], INTEGER[], INTEGER, INTEGER, INTEGER[], INTEGER[]);
CREATE OR REPLACE FUNCTION pgthrottle_scope(p_scope TEXT, p_lo_s BIGINT, p_lo_m BIGINT, p_lo_h BIGINT, p_lo_d BIGINT,
    OUT sb BIGINT[], OUT sn BIGINT[], OUT ss BIGINT, OUT mb BIGINT[], OUT mn BIGINT[], OUT sm BIGINT,
    OUT hb BIGINT[], OUT hn BIGINT[], OUT sh BIGINT, OUT db BIGINT[], OUT dn BIGINT[], OUT sd BIGINT,
    OUT fid BIGINT[], OUT fdl BIGINT[], OUT fn BIGINT[], OUT nf BIGINT)
LANGUAGE plpgsql STABLE AS $$
BEGIN
    SELECT array_agg(b.bucket ORDER BY b.bucket) FILTER (WHERE b.width_ms = 100),
           array_agg(b.sends::BIGINT ORDER BY b.bucket) FILTER (WHERE b.width_ms = 100),
           coalesce(sum(b.sends) FILTER (WHERE b.width_ms = 100), 0),
           array_agg(b.bucket ORDER BY b.bucket) FILTER (WHERE b.width_ms = 1000),
           array_agg(b.sends::BIGINT ORDER BY b.bucket) FILTER (WHERE b.width_ms = 1000),
           coalesce(sum(b.sends) FILTER (WHERE b.width_ms = 1000), 0),
           array_agg(b.bucket ORDER BY b.bucket) FILTER (WHERE b.width_ms = 60000),
           array_agg(b.sends::BIGINT ORDER BY b.bucket) FILTER (WHERE b.width_ms = 60000),
           coalesce(sum(b.sends) FILTER (WHERE b.width_ms = 60000), 0),
           array_agg(b.bucket ORDER BY b.bucket) FILTER (WHERE b.width_ms = 900000),
           array_agg(b.sends::BIGINT ORDER BY b.bucket) FILTER (WHERE b.width_ms = 900000),
           coalesce(sum(b.sends) FILTER (WHERE b.width_ms = 900000), 0)
    INTO sb, sn, ss, mb, mn, sm, hb, hn, sh, db, dn, sd
    FROM pgthrottle_buckets b WHERE b.scope = p_scope
        AND ((b.width_ms = 100 AND b.bucket >= p_lo_s) OR (b.width_ms = 1000 AND b.bucket >= p_lo_m)
            OR (b.width_ms = 60000 AND b.bucket >= p_lo_h) OR (b.width_ms = 900000 AND b.bucket >= p_lo_d));
    IF p_scope = '' THEN
        SELECT array_agg(f.id ORDER BY f.id), array_agg(f.deadline_ns ORDER BY f.id),
               array_agg(f.n::BIGINT ORDER BY f.id), coalesce(sum(f.n), 0)
        INTO fid, fdl, fn, nf FROM pgthrottle_flights f;
    ELSE
        SELECT array_agg(f.id ORDER BY f.id), array_agg(f.deadline_ns ORDER BY f.id),
               array_agg(f.n::BIGINT ORDER BY f.id), coalesce(sum(f.n), 0)
        INTO fid, fdl, fn, nf FROM pgthrottle_flights f WHERE f.scope = p_scope;
    END IF;
END
$$;

-- pgthrottle_reserve admits a batch of asks in order, each as if alone,
-- under the admission lock (the key is "nornthr2"): an ask of p_ns[k]
-- slots is admitted whole when every limited window (the global second,
-- minute, hour and day, and its inbox's minute, hour and day) has room for
-- all of them. It answers one row per scope it read, as it was before the
-- batch's first ask from that scope: the global scope last, with each
-- ask's verdict (admitted, and its reservation id or 0). Its state is
-- gone: SQLSTATE NWT01.
CREATE OR REPLACE FUNCTION pgthrottle_reserve(p_scopes TEXT[], p_leases BIGINT[], p_ns INTEGER[],
    p_gsec INTEGER, p_gmin INTEGER, p_ghour INTEGER, p_gday INTEGER,
    p_imins INTEGER[], p_ihours INTEGER[], p_idays INTEGER[])
RETURNS TABLE (o_scope TEXT, o_now BIGINT, o_sb BIGINT[], o_sn BIGINT[], o_mb BIGINT[], o_mn BIGINT[],
    o_hb BIGINT[], o_hn BIGINT[], o_db BIGINT[], o_dn BIGINT[],
    o_fid BIGINT[], o_fdl BIGINT[], o_fn BIGINT[], o_admitted BOOLEAN[], o_ids BIGINT[])
LANGUAGE plpgsql AS $$
DECLARE
    t BIGINT;
    lo_s BIGINT; lo_m BIGINT; lo_h BIGINT; lo_d BIGINT;
    g_s BIGINT; g_m BIGINT; g_h BIGINT; g_d BIGINT; g_f BIGINT;
    i_s BIGINT := 0; i_m BIGINT := 0; i_h BIGINT := 0; i_d BIGINT := 0; i_f BIGINT := 0;
    gsb BIGINT[]; gsn BIGINT[]; gmb BIGINT[]; gmn BIGINT[]; ghb BIGINT[]; ghn BIGINT[]; gdb BIGINT[]; gdn BIGINT[];
    gfid BIGINT[]; gfdl BIGINT[]; gfn BIGINT[];
    cur TEXT;
    ok BOOLEAN;
    n_asks INTEGER := coalesce(array_length(p_scopes, 1), 0);
    adm BOOLEAN[] := array_fill(false, ARRAY[n_asks]);
    ids BIGINT[] := array_fill(0::BIGINT, ARRAY[n_asks]);
    rid BIGINT;
    gone_s TEXT[];
    gone_t BIGINT[];
BEGIN
    PERFORM pg_advisory_xact_lock(7957704885311926834);
    PERFORM pgthrottle_check();
    PERFORM set_config('pgthrottle.own', 'on', true);
    t := (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT;
    IF EXISTS (SELECT 1 FROM pgthrottle_flights WHERE deadline_ns <= t) THEN
        WITH gone AS (DELETE FROM pgthrottle_flights f WHERE f.deadline_ns <= t RETURNING f.scope, f.deadline_ns, f.n)
        SELECT array_agg(gone.scope), array_agg(gone.deadline_ns) INTO gone_s, gone_t
        FROM gone CROSS JOIN LATERAL generate_series(1, gone.n);
        PERFORM pgthrottle_count(gone_s, gone_t);
    END IF;
    lo_s := (t - 1000000000) / 100000000;
    lo_m := (t - 60000000000) / 1000000000;
    lo_h := (t - 3600000000000) / 60000000000;
    lo_d := (t - 86400000000000) / 900000000000;
    -- Old buckets are only skipped below; deleting them now and then
    -- keeps the table small without a delete on every admission. A bucket
    -- goes only once all of it has left its window: a day's, 24 h 15 min
    -- after it began.
    IF random() < 0.02 THEN
        DELETE FROM pgthrottle_buckets b WHERE (b.width_ms = 100 AND b.bucket < lo_s)
            OR (b.width_ms = 1000 AND b.bucket < lo_m) OR (b.width_ms = 60000 AND b.bucket < lo_h)
            OR (b.width_ms = 900000 AND b.bucket < lo_d);
    END IF;
    SELECT * INTO gsb, gsn, g_s, gmb, gmn, g_m, ghb, ghn, g_h, gdb, gdn, g_d, gfid, gfdl, gfn, g_f
        FROM pgthrottle_scope('', lo_s, lo_m, lo_h, lo_d);
    FOR k IN 1 .. n_asks LOOP
        IF p_scopes[k] <> '' AND p_scopes[k] IS DISTINCT FROM cur THEN
            cur := p_scopes[k];
            o_scope := cur; o_now := t; o_admitted := NULL; o_ids := NULL;
            SELECT * INTO o_sb, o_sn, i_s, o_mb, o_mn, i_m, o_hb, o_hn, i_h, o_db, o_dn, i_d, o_fid, o_fdl, o_fn, i_f
                FROM pgthrottle_scope(cur, lo_s, lo_m, lo_h, lo_d);
            RETURN NEXT;
        END IF;
        ok := NOT ((p_gsec > 0 AND g_s + g_f + p_ns[k] > p_gsec) OR (p_gmin > 0 AND g_m + g_f + p_ns[k] > p_gmin)
            OR (p_ghour > 0 AND g_h + g_f + p_ns[k] > p_ghour) OR (p_gday > 0 AND g_d + g_f + p_ns[k] > p_gday));
        IF p_scopes[k] <> '' THEN
            ok := ok AND NOT ((p_imins[k] > 0 AND i_m + i_f + p_ns[k] > p_imins[k])
                OR (p_ihours[k] > 0 AND i_h + i_f + p_ns[k] > p_ihours[k])
                OR (p_idays[k] > 0 AND i_d + i_f + p_ns[k] > p_idays[k]));
        END IF;
        IF ok THEN
            INSERT INTO pgthrottle_flights (scope, deadline_ns, n) VALUES (p_scopes[k], t + p_leases[k], p_ns[k])
                RETURNING id INTO rid;
            adm[k] := true;
            ids[k] := rid;
            g_f := g_f + p_ns[k];
            IF p_scopes[k] <> '' THEN
                i_f := i_f + p_ns[k];
            END IF;
        END IF;
    END LOOP;
    o_scope := ''; o_now := t; o_sb := gsb; o_sn := gsn; o_mb := gmb; o_mn := gmn; o_hb := ghb; o_hn := ghn;
    o_db := gdb; o_dn := gdn; o_fid := gfid; o_fdl := gfdl; o_fn := gfn;
    o_admitted := adm; o_ids := ids;
    PERFORM set_config('pgthrottle.own', '', true);
    RETURN NEXT;
END
$$;

-- pgthrottle_settle settles one slot of the reservation p_ids[i] per
-- element (a reservation with no slot left is deleted) and counts the
-- commits (p_commit), each p_ago ns before now, in every window of the
-- global scope and of p_scopes'. A commit counts even if its reservation is gone (reclaimed
-- at its deadline, or lost with the state): twice errs on the safe side.
-- Under the admission lock: two batches upserting the same bucket rows in
-- different orders would deadlock.
CREATE OR REPLACE FUNCTION pgthrottle_settle(p_ids BIGINT[], p_scopes TEXT[], p_commit BOOLEAN[], p_ago BIGINT[])
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    t BIGINT;
    sc TEXT[];
    ts BIGINT[];
BEGIN
    PERFORM pg_advisory_xact_lock(7957704885311926834);
    PERFORM set_config('pgthrottle.own', 'on', true);
    t := (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT;
    WITH x AS (SELECT id, count(*)::INTEGER AS c FROM unnest(p_ids) AS id GROUP BY id),
    left_ AS (UPDATE pgthrottle_flights f SET n = f.n - x.c FROM x WHERE f.id = x.id AND f.n > x.c RETURNING f.id)
    DELETE FROM pgthrottle_flights f USING x WHERE f.id = x.id AND f.id NOT IN (SELECT id FROM left_);
    SELECT array_agg(x.s), array_agg(t - greatest(x.a, 0)) INTO sc, ts
        FROM unnest(p_scopes, p_commit, p_ago) AS x(s, c, a) WHERE x.c;
    IF sc IS NOT NULL THEN
        PERFORM pgthrottle_count(sc, ts);
    END IF;
    PERFORM set_config('pgthrottle.own', '', true);
END
$$;

-- pgthrottle_restore writes the state from the send record: the sends
-- counted (p_sent_*) and those in flight (p_pend_*), and marks it present.
-- Unless p_replace, only while it is lost: of several servers that found
-- it lost, the first rebuilds it and the others find it present. An
-- incomplete state (lost set) is rebuilt as a lost one.
CREATE OR REPLACE FUNCTION pgthrottle_restore(p_replace BOOLEAN, p_sent_scopes TEXT[], p_sent_at BIGINT[],
    p_pend_scopes TEXT[], p_pend_deadlines BIGINT[]) RETURNS BOOLEAN LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(7957704885311926834);
    IF NOT p_replace AND EXISTS (SELECT 1 FROM pgthrottle_present WHERE lost IS NULL) THEN
        RETURN false;
    END IF;
    PERFORM set_config('pgthrottle.own', 'on', true);
    DELETE FROM pgthrottle_buckets;
    DELETE FROM pgthrottle_flights;
    PERFORM pgthrottle_count(p_sent_scopes, p_sent_at);
    INSERT INTO pgthrottle_flights (scope, deadline_ns) SELECT * FROM unnest(p_pend_scopes, p_pend_deadlines);
    INSERT INTO pgthrottle_present (present) VALUES (true) ON CONFLICT (present) DO UPDATE SET lost = NULL;
    PERFORM set_config('pgthrottle.own', '', true);
    RETURN true;
END
$$;

-- The throttle's identity: one random value, written by the first server
-- alone on the database, which every server compares with the one the
-- database records beside its throttle settings (identity.go).
CREATE TABLE IF NOT EXISTS pgthrottle_identity (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    identity TEXT    NOT NULL
);
