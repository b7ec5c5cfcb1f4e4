// Package pgthrottle keeps a shared throttle's state in PostgreSQL, the
// database every server already uses (THROTTLE_BACKEND=postgres). It is a
// throttledriver.Driver: its SQL is schema.sql, applied by Migrate, and each of
// its calls is one statement: an admission batch, a batch of settlements,
// a read, a restore. New returns the shared.Throttle over it.
package pgthrottle

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

//go:embed schema.sql
var schema string

// Version is the version of schema.sql; Migrate records it. Raise it with
// every change to schema.sql.
const Version = 5

// errLost is the SQLSTATE the functions raise when the state is gone.
const errLost = "NWT01"

// errIncomplete is the SQLSTATE they raise when a part of it was deleted
// or truncated from outside them; the message names the part.
const errIncomplete = "NWT02"

// New returns a shared throttle whose state lives in the database of pool,
// which Migrate must have prepared. It starts the throttle's background
// work; Close stops it (the pool stays open: it is the caller's).
func New(pool *pgxpool.Pool, o shared.Options) *shared.Throttle {
	return shared.New(&driver{pool: pool}, o)
}

// OpenPool opens the throttle's own small pool on the database at dsn (a
// postgres:// URL), whose transactions commit without waiting for the WAL
// flush (synchronous_commit=off). Admissions serialize on one lock, and a
// synchronous commit would hold it through an fsync. It loses nothing that
// matters: the send path's next write, the message row, is committed
// synchronously in the same database before the provider is called, and
// the WAL is flushed in order, so a reservation whose send can go out is
// durable by then. A commit or release lost in a database crash leaves its
// reservation to be counted at its deadline: later than it should, never
// earlier.
func OpenPool(ctx context.Context, dsn string, conns int) (*pgxpool.Pool, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgthrottle: database URL: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("pgthrottle: database URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["synchronous_commit"] = "off"
	cfg.MaxConns = int32(conns)
	cfg.MinConns = 0
	return pgxpool.NewWithConfig(ctx, cfg)
}

// driver implements throttledriver.Driver.
type driver struct{ pool *pgxpool.Pool }

func (d *driver) Name() string { return "postgres" }

func lost(err error) error {
	var pe *pgconn.PgError
	switch {
	case !errors.As(err, &pe):
	case pe.Code == errLost:
		return throttledriver.ErrStateLost
	case pe.Code == errIncomplete:
		return &throttledriver.IncompleteError{Part: pe.Message}
	}
	return err
}

// Reserve implements throttledriver.Driver with one call of pgthrottle_reserve.
func (d *driver) Reserve(ctx context.Context, global throttle.Limits, asks []throttledriver.Ask) (*throttledriver.Batch, error) {
	n := len(asks)
	scopes, leases, ns := make([]string, n), make([]int64, n), make([]int32, n)
	mins, hours, days := make([]int32, n), make([]int32, n), make([]int32, n)
	for i, a := range asks {
		scopes[i], leases[i], ns[i] = a.Inbox, int64(a.Lease), int32(a.Slots())
		mins[i], hours[i], days[i] = int32(a.Limits.PerMinute), int32(a.Limits.PerHour), int32(a.Limits.PerDay)
	}
	rows, err := d.pool.Query(ctx, `SELECT * FROM pgthrottle_reserve($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		scopes, leases, ns, int32(global.PerSecond), int32(global.PerMinute), int32(global.PerHour), int32(global.PerDay),
		mins, hours, days)
	if err != nil {
		return nil, lost(err)
	}
	b := &throttledriver.Batch{Raw: throttledriver.Raw{Inbox: map[string]*throttledriver.RawScope{}}}
	var admitted []bool
	var ids []int64
	err = scanScopes(rows, &b.Raw, func(r *reserveExtra) { admitted, ids = r.admitted, r.ids })
	if err != nil {
		return nil, lost(err)
	}
	if len(admitted) != n || len(ids) != n {
		return nil, fmt.Errorf("pgthrottle: pgthrottle_reserve answered %d verdicts for %d", len(admitted), n)
	}
	b.Verdicts = make([]throttledriver.Verdict, n)
	for i := range n {
		b.Verdicts[i] = throttledriver.Verdict{Admitted: admitted[i], ID: ids[i]}
	}
	return b, nil
}

type reserveExtra struct {
	admitted []bool
	ids      []int64
}

// scanScopes reads rows of (scope, now, second buckets, their sends,
// minute buckets, their sends, hour buckets, their sends, day buckets,
// their sends, flight ids, their deadlines, their slots[, admitted, ids])
// into raw; the global scope is the row of scope "". extra, if set, gets
// the last two columns of the global row.
func scanScopes(rows pgx.Rows, raw *throttledriver.Raw, extra func(*reserveExtra)) error {
	defer rows.Close()
	for rows.Next() {
		var (
			scope                          string
			now                            int64
			sb, sn, mb, mn, hb, hn, db, dn []int64
			fid, fdl, fn                   []int64
			x                              reserveExtra
		)
		dest := []any{&scope, &now, &sb, &sn, &mb, &mn, &hb, &hn, &db, &dn, &fid, &fdl, &fn}
		if extra != nil {
			dest = append(dest, &x.admitted, &x.ids)
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		s := &throttledriver.RawScope{Second: buckets(sb, sn), Minute: buckets(mb, mn), Hour: buckets(hb, hn),
			Day: buckets(db, dn)}
		for i := range min(len(fid), len(fdl), len(fn)) {
			s.Flights = append(s.Flights, throttledriver.Flight{ID: fid[i], Deadline: fdl[i], N: int(fn[i])})
		}
		raw.Now = now
		if scope != "" {
			raw.Inbox[scope] = s
			continue
		}
		raw.Global = *s
		if extra != nil {
			extra(&x)
		}
	}
	return rows.Err()
}

// buckets zips bucket indexes with their sends.
func buckets(idx, sends []int64) []throttledriver.Bucket {
	out := make([]throttledriver.Bucket, min(len(idx), len(sends)))
	for i := range out {
		out[i] = throttledriver.Bucket{Index: idx[i], Sends: int(sends[i])}
	}
	return out
}

// Settle implements throttledriver.Driver with one call of pgthrottle_settle.
func (d *driver) Settle(ctx context.Context, ss []throttledriver.Settlement) error {
	n := len(ss)
	ids, scopes, commits, agos := make([]int64, n), make([]string, n), make([]bool, n), make([]int64, n)
	for i, s := range ss {
		ids[i], scopes[i], commits[i], agos[i] = s.ID, s.Inbox, s.Commit, int64(s.Age)
	}
	_, err := d.pool.Exec(ctx, `SELECT pgthrottle_settle($1, $2, $3, $4)`, ids, scopes, commits, agos)
	return err
}

// readSQL reads, in one statement and so one snapshot, the database's
// clock and the global scope and $1's; pgthrottle_check raises when the
// state is lost or incomplete. It takes no lock and writes nothing.
const readSQL = `WITH n AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000000000)::BIGINT AS t),
s(scope) AS (SELECT ''::TEXT UNION ALL SELECT $1::TEXT WHERE $1::TEXT <> '')
SELECT s.scope, n.t, r.sb, r.sn, r.mb, r.mn, r.hb, r.hn, r.db, r.dn, r.fid, r.fdl, r.fn
FROM s, n, LATERAL pgthrottle_scope(s.scope, (n.t - 1000000000) / 100000000, (n.t - 60000000000) / 1000000000,
	(n.t - 3600000000000) / 60000000000, (n.t - 86400000000000) / 900000000000) r
WHERE pgthrottle_check()`

// Read implements throttledriver.Driver.
func (d *driver) Read(ctx context.Context, inbox string) (*throttledriver.Raw, error) {
	rows, err := d.pool.Query(ctx, readSQL, inbox)
	if err != nil {
		return nil, lost(err)
	}
	raw := &throttledriver.Raw{Inbox: map[string]*throttledriver.RawScope{}}
	if err := scanScopes(rows, raw, nil); err != nil {
		return nil, lost(err)
	}
	return raw, nil
}

// Restore implements throttledriver.Driver with one call of pgthrottle_restore.
func (d *driver) Restore(ctx context.Context, rec throttledriver.Record, replace bool) (bool, error) {
	ss, st := make([]string, len(rec.Sent)), make([]int64, len(rec.Sent))
	for i, s := range rec.Sent {
		ss[i], st[i] = s.Inbox, s.At.UnixNano()
	}
	ps, pd := make([]string, len(rec.Pending)), make([]int64, len(rec.Pending))
	for i, p := range rec.Pending {
		ps[i], pd[i] = p.Inbox, p.Deadline.UnixNano()
	}
	var done bool
	err := d.pool.QueryRow(ctx, `SELECT pgthrottle_restore($1, $2, $3, $4, $5)`, replace, ss, st, ps, pd).Scan(&done)
	return done, err
}
