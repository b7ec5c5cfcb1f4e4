package skuld

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Admissions of one server are batched: while a call of
// throttle_reserve_many is on its way, the requests that arrive wait for
// the next one, which takes them all (up to maxBatch) under one lock and in
// one round trip, each judged exactly as alone in turn. An
// idle server's admission goes at once; a busy one's share the fixed cost
// of a call (round trip, transaction, lock, the global scope's sums), which
// is most of it.

// maxBatch bounds the sends one call admits.
const maxBatch = 64

// batchTimeout bounds one call; the callers' own contexts do not, since
// one client going away must not fail the others' admissions.
const batchTimeout = 5 * time.Second

// admitRequest is one ReserveInbox waiting for its batch.
type admitRequest struct {
	inboxID string
	lease   int64 // ns, margin included
	lim     Limits
	version string
	done    chan admitResult // buffered: the batch never waits for a caller
}

// admitResult is what throttle_reserve_many answered for one request.
type admitResult struct {
	admitted, stale bool
	now, id         int64
	global, inbox   scopeSummary
	err             error
}

// admissions queues the requests of the batch to come.
type admissions struct {
	mu      sync.Mutex
	queue   []*admitRequest
	running bool // a goroutine is sending batches
}

// admit queues r and waits for its answer. A caller that gives up first
// leaves behind a goroutine that releases the reservation if it was made.
func (p *PostgresThrottle) admit(ctx context.Context, r *admitRequest) admitResult {
	r.done = make(chan admitResult, 1)
	b := &p.admissions
	b.mu.Lock()
	b.queue = append(b.queue, r)
	if !b.running {
		b.running = true
		go p.sendBatches()
	}
	b.mu.Unlock()
	select {
	case res := <-r.done:
		return res
	case <-ctx.Done():
		go p.releaseAbandoned(r.done)
		return admitResult{err: ctx.Err()}
	}
}

// releaseAbandoned waits for the answer to a request whose caller gave up
// and gives back the slot it was admitted to, if it was.
func (p *PostgresThrottle) releaseAbandoned(done <-chan admitResult) {
	res := <-done
	if res.admitted {
		_ = p.settles.settle(context.Background(), settled{id: res.id}, false)
	}
}

// sendBatches sends batches until the queue is empty.
func (p *PostgresThrottle) sendBatches() {
	b := &p.admissions
	for {
		b.mu.Lock()
		batch := b.queue
		if len(batch) > maxBatch {
			batch = batch[:maxBatch:maxBatch]
			b.queue = append([]*admitRequest(nil), b.queue[maxBatch:]...)
		} else {
			b.queue = nil
		}
		if len(batch) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		b.mu.Unlock()
		// An inbox's requests together: throttle_reserve_many reads its
		// scope once for them. They all arrived while the last call was
		// on its way, so any order is one they could have come in.
		slices.SortStableFunc(batch, func(a, b *admitRequest) int { return strings.Compare(a.inboxID, b.inboxID) })
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		res, err := p.reserveMany(ctx, batch)
		cancel()
		for i, r := range batch {
			if err != nil {
				r.done <- admitResult{err: err}
				continue
			}
			r.done <- res[i]
		}
	}
}

// reserveMany calls throttle_reserve_many for batch: one answer per
// request, in order.
func (p *PostgresThrottle) reserveMany(ctx context.Context, batch []*admitRequest) ([]admitResult, error) {
	n := len(batch)
	inboxes, versions := make([]string, n), make([]string, n)
	leases, mins, hours := make([]int64, n), make([]int64, n), make([]int64, n)
	for i, r := range batch {
		inboxes[i], versions[i], leases[i] = r.inboxID, r.version, r.lease
		mins[i], hours[i] = int64(r.lim.PerMinute), int64(r.lim.PerHour)
	}
	rows, err := p.db.QueryContext(ctx, `SELECT admitted, stale, now_ns, res_id,
		g_used_m, g_used_h, g_old_m, g_old_h, g_flight, i_used_m, i_used_h, i_old_m, i_old_h, i_flight
		FROM throttle_reserve_many($1, $2, $3, $4, $5, $6, $7, $8)`,
		p.clockOffset(), inboxes, leases, p.limits.global.PerMinute, p.limits.global.PerHour, mins, hours, versions)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]admitResult, 0, n)
	for rows.Next() {
		var (
			r       admitResult
			now, id sql.NullInt64
			g, in   [5]sql.NullInt64 // used minute, hour; oldest minute, hour; in flight
		)
		if err := rows.Scan(&r.admitted, &r.stale, &now, &id, &g[0], &g[1], &g[2], &g[3], &g[4],
			&in[0], &in[1], &in[2], &in[3], &in[4]); err != nil {
			return nil, err
		}
		r.now, r.id, r.global, r.inbox = now.Int64, id.Int64, pgSummary(g), pgSummary(in)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if len(out) != n {
		return nil, fmt.Errorf("throttle_reserve_many answered %d of %d", len(out), n)
	}
	return out, nil
}
