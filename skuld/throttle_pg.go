package skuld

import (
	"context"
	"database/sql"
	"fmt"
	neturl "net/url"
	"time"

	// Registers the "pgx" database/sql driver.
	_ "github.com/jackc/pgx/v5/stdlib"
)

// PostgresThrottle is a Throttle whose windows live in the PostgreSQL
// database every server already uses (tables throttle_counts and
// throttle_reservations, migration 0005), so that any number of servers on
// that database keep one promise. Admission runs in a short transaction
// under a transaction-level advisory lock: it stamps the database's
// clock_timestamp(), counts the reservations whose lease has run out (their
// servers died) at their deadline, reads the scopes, judges, and inserts
// the reservation. Commits and releases are gathered for settleDelay and
// sent together, so that a send costs about one statement, not two; near
// a limit, where a refusal's Retry-After would take a pending commit for a
// send still in flight, each goes at once.
//
// It is safe for concurrent use, by goroutines and by servers.
type PostgresThrottle struct {
	db         *sql.DB
	limits     sharedLimits
	margin     time.Duration
	settles    *settles
	admissions admissions
	// offset is added to the database's clock: nil but in tests, which
	// move time without waiting for it.
	offset func() time.Duration
}

// PostgresOptions configures a PostgresThrottle.
type PostgresOptions struct {
	Global, Inbox Limits        // the global limits and the inbox defaults
	LeaseMargin   time.Duration // 0: DefaultLeaseMargin
	// SettleDelay is how long commits and releases far from every limit
	// are gathered before they are sent together; 0: settleDelay.
	SettleDelay time.Duration
	// ClockOffset, if set, is added to the database's clock at every
	// reading; for tests only.
	ClockOffset func() time.Duration
}

// pgThrottleLock keys the advisory lock that serializes admissions (written
// out in throttle_reserve, migration 0005); it is
// distinct from the migrations' and the single-server lock's keys.
const pgThrottleLock int64 = 0x6e6f726e_74687231 // "nornthr1"

// nowSQL is the database's clock in ns since the Unix epoch, plus $1.
const nowSQL = `(extract(epoch from clock_timestamp()) * 1000000000)::bigint + $1::bigint`

// OpenPostgresThrottleDB opens the throttle's own small pool on the
// database at url (a postgres:// URL), whose transactions commit without
// waiting for the WAL flush (synchronous_commit=off). Admissions serialize
// on one lock, and a synchronous commit would hold it through an fsync.
// It loses nothing that matters: the send path's next write, the message
// row, is committed synchronously in the same database before the provider
// is called, and the WAL is flushed in order, so a reservation whose send
// can go out is durable by then. A commit or release lost in a database
// crash leaves its reservation to be reclaimed and counted at its
// deadline: later than it should, never earlier.
func OpenPostgresThrottleDB(url string, conns int) (*sql.DB, error) {
	u, err := neturl.Parse(url)
	if err != nil {
		return nil, fmt.Errorf("skuld: throttle database URL: %w", err)
	}
	q := u.Query()
	q.Set("synchronous_commit", "off")
	u.RawQuery = q.Encode()
	db, err := sql.Open("pgx", u.String())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// NewPostgresThrottle returns a PostgresThrottle over db, whose schema must
// be migrated.
func NewPostgresThrottle(db *sql.DB, o PostgresOptions) *PostgresThrottle {
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = DefaultLeaseMargin
	}
	p := &PostgresThrottle{db: db, limits: newSharedLimits(o.Global, o.Inbox), margin: o.LeaseMargin,
		offset: o.ClockOffset}
	p.settles = newSettles(o.SettleDelay, o.ClockOffset, p.settle)
	return p
}

func (p *PostgresThrottle) clockOffset() int64 {
	if p.offset == nil {
		return 0
	}
	return int64(p.offset())
}

func (p *PostgresThrottle) unavailable(err error) error {
	return &UnavailableError{Backend: "postgres", Err: err}
}

// ReserveInbox implements Throttle. Admission is one call of the
// database function throttle_reserve_many (migration 0006), shared with
// the admissions that arrive meanwhile (see admit), so the admission lock
// is held for one statement, not for round trips; only a refusal reads the
// raw state back to compute Retry-After.
func (p *PostgresThrottle) ReserveInbox(ctx context.Context, lease time.Duration, inboxID string, o Override) (Ticket, error) {
	lim := p.limits.inbox.with(o)
	if inboxID == "" {
		lim = Limits{}
	}
	res := p.admit(ctx, &admitRequest{inboxID: inboxID, lease: int64(max(lease, 0) + p.margin), lim: lim, version: o.Version})
	switch {
	case res.err != nil:
		return nil, p.unavailable(res.err)
	case res.stale:
		return nil, ErrStaleInbox
	case res.admitted:
		a := &admission{now: res.now, global: res.global, inbox: res.inbox,
			limits: [2]Limits{p.limits.global, lim}, inboxScope: inboxID != ""}
		p.settles.saw(a)
		return &pgTicket{p: p, id: res.id, a: a}, nil
	}
	p.settles.saw(nil)
	return nil, p.refusal(ctx, inboxID, o)
}

// refusal reads the state a refused admission met and returns its
// *RateLimitedError, with Retry-After from the same windows as the
// in-memory limiter.
func (p *PostgresThrottle) refusal(ctx context.Context, inboxID string, o Override) error {
	now, g, in, err := p.snapshot(ctx, inboxID)
	if err != nil {
		return p.unavailable(err)
	}
	var iw *windows
	if inboxID != "" {
		iw = in.windows(now, p.limits.inbox.with(o))
	}
	if rl := judge(now, g.windows(now, p.limits.global), iw); rl != nil {
		return rl
	}
	// Room appeared between the two statements (a release, a bucket
	// leaving): refuse for the least time; the client's retry is admitted.
	return &RateLimitedError{RetryAfter: time.Second,
		Violations: []Violation{{Window: "per-minute", Limit: p.limits.global.PerMinute, RetryAfter: time.Second}}}
}

// snapshotSQL reads, in one statement and so one snapshot, the database's
// clock (the row of width -1), the buckets of the global scope and of $2
// still in their window, and the deadlines of the reservations (width 0).
// It takes no lock and writes nothing.
const snapshotSQL = `WITH n AS (SELECT ` + nowSQL + ` AS t)
SELECT '', -1, n.t, 0 FROM n
UNION ALL SELECT c.scope, c.width, c.bucket, c.sends FROM throttle_counts c, n WHERE c.scope IN ('', $2)
	AND ((c.width = 1 AND c.bucket >= (n.t - 60000000000) / 1000000000)
	  OR (c.width = 60 AND c.bucket >= (n.t - 3600000000000) / 60000000000))
UNION ALL SELECT '', 0, deadline_ns, 0 FROM throttle_reservations
UNION ALL SELECT $2, 0, deadline_ns, 0 FROM throttle_reservations WHERE inbox_id = $2 AND $2 <> ''`

// snapshot reads the global scope and inboxID's (empty for "") at the
// database's now. A reservation past its deadline is read as what the next
// admission will make of it: a send counted at its deadline.
func (p *PostgresThrottle) snapshot(ctx context.Context, inboxID string) (int64, *scopeState, *scopeState, error) {
	// This server's own commits and releases are seen by its reads.
	if err := p.settles.flush(ctx); err != nil {
		return 0, nil, nil, err
	}
	rows, err := p.db.QueryContext(ctx, snapshotSQL, p.clockOffset(), inboxID)
	if err != nil {
		return 0, nil, nil, err
	}
	defer rows.Close()
	var (
		now       int64
		g, in     = newScopeState(), newScopeState()
		deadlines [2][]int64
	)
	for rows.Next() {
		var (
			scope    string
			width, b int64
			sends    int
		)
		if err := rows.Scan(&scope, &width, &b, &sends); err != nil {
			return 0, nil, nil, err
		}
		s, i := g, 0
		if scope != "" {
			s, i = in, 1
		}
		switch width {
		case -1:
			now = b
		case 0:
			deadlines[i] = append(deadlines[i], b)
		case minuteBucket:
			s.minute[b] += sends
		case hourBucket:
			s.hour[b] += sends
		}
	}
	if err := rows.Err(); err != nil {
		return 0, nil, nil, err
	}
	for i, s := range [2]*scopeState{g, in} {
		for _, d := range deadlines[i] {
			if d > now {
				s.deadlines = append(s.deadlines, d)
				continue
			}
			s.minute[floorDiv(d, int64(time.Second))]++
			s.hour[floorDiv(d, int64(time.Minute))]++
		}
	}
	return now, g, in, nil
}

// InboxVersion implements Throttle: inbox_version, which a trigger moves
// with every change to inboxes (migration 0006).
func (p *PostgresThrottle) InboxVersion(ctx context.Context) (string, error) {
	var v string
	if err := p.db.QueryRowContext(ctx, `SELECT v::TEXT FROM inbox_version`).Scan(&v); err != nil {
		return "", p.unavailable(err)
	}
	return v, nil
}

// InboxesChanged implements Throttle: nothing to do, the trigger did it in
// the changing transaction.
func (p *PostgresThrottle) InboxesChanged(context.Context) error { return nil }

// State implements Throttle.
func (p *PostgresThrottle) State(ctx context.Context) (State, error) {
	return p.state(ctx, "", Override{})
}

// InboxState implements Throttle.
func (p *PostgresThrottle) InboxState(ctx context.Context, inboxID string, o Override) (State, error) {
	return p.state(ctx, inboxID, o)
}

func (p *PostgresThrottle) state(ctx context.Context, inboxID string, o Override) (State, error) {
	now, g, in, err := p.snapshot(ctx, inboxID)
	if err != nil {
		return State{}, p.unavailable(err)
	}
	if inboxID == "" {
		return g.windows(now, p.limits.global).state(now), nil
	}
	return in.windows(now, p.limits.inbox.with(o)).state(now), nil
}

// States implements Throttle: both from one snapshot.
func (p *PostgresThrottle) States(ctx context.Context, inboxID string, o Override) (State, State, error) {
	now, g, in, err := p.snapshot(ctx, inboxID)
	if err != nil {
		return State{}, State{}, p.unavailable(err)
	}
	return g.windows(now, p.limits.global).state(now), in.windows(now, p.limits.inbox.with(o)).state(now), nil
}

// pgSummary reads one scope's columns of throttle_reserve.
func pgSummary(c [5]sql.NullInt64) scopeSummary {
	return scopeSummary{
		minute:   windowSummary{used: int(c[0].Int64), oldest: c[2].Int64, hasOldest: c[2].Valid},
		hour:     windowSummary{used: int(c[1].Int64), oldest: c[3].Int64, hasOldest: c[3].Valid},
		inFlight: int(c[4].Int64),
	}
}

// settle sends a batch of commits and releases (see settles).
func (p *PostgresThrottle) settle(ctx context.Context, now int64, batch []settled) error {
	var ids, agos, releases []int64
	for _, x := range batch {
		if x.commit {
			ids, agos = append(ids, x.id), append(agos, now-x.at)
		} else {
			releases = append(releases, x.id)
		}
	}
	_, err := p.db.ExecContext(ctx, `SELECT throttle_settle(`+nowSQL+`, $2, $3, $4)`, p.clockOffset(), ids, agos, releases)
	return err
}

// Flush sends this server's pending commits and releases now; call it
// before closing the database.
func (p *PostgresThrottle) Flush(ctx context.Context) error {
	if err := p.settles.flush(ctx); err != nil {
		return p.unavailable(err)
	}
	return nil
}

type pgTicket struct {
	p  *PostgresThrottle
	id int64
	a  *admission
}

// Commit counts the send at the moment of the call. Far from every limit
// it is gathered with others for settleDelay; one that never arrives (the
// server died) leaves the reservation to be reclaimed, and counted, at its
// deadline. Near a limit it is sent at once.
func (t *pgTicket) Commit(ctx context.Context) error {
	return t.p.settled(ctx, settled{id: t.id, commit: true}, t.a)
}

// Release gives the slot back, gathered or at once like Commit.
func (t *pgTicket) Release(ctx context.Context) error {
	return t.p.settled(ctx, settled{id: t.id}, t.a)
}

func (p *PostgresThrottle) settled(ctx context.Context, x settled, a *admission) error {
	if err := p.settles.settle(ctx, x, a.nearLimit()); err != nil {
		return p.unavailable(err)
	}
	return nil
}

func (t *pgTicket) MinuteCount() int { return t.a.minuteCount() }
func (t *pgTicket) HourCount() int   { return t.a.hourCount() }

// States implements Ticket, from what the admission read.
func (t *pgTicket) States(counted bool) (State, State, bool) { return t.a.states(counted) }
