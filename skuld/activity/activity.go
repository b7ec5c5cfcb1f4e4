// Package activity counts what the dashboard charts: sends by outcome and
// refusals by reason, per minute. A send adds to a count in memory; Flush,
// which the server's janitor calls about once a second and at shutdown,
// adds the counts to the database's send_counts in one statement, so that
// the send path never waits on the table's few hot rows, and every server
// on a shared database adds its own.
package activity

import (
	"context"
	"sync"
	"time"

	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// What is counted: a send's outcome (skuld.OutcomeSent, OutcomeFailed,
// OutcomeUnknown) or the reason a send was refused.
const (
	Throttled     = "throttled"      // 429: the throttle's windows were full
	DomainBlocked = "domain_blocked" // the outbound domain filter
	Suppressed    = "suppressed"     // a recipient on the suppression list
	Validation    = "validation"     // the request itself was refused (400, 413, 422)
)

// ReputationWindow is the span the bounce and complaint rates are taken
// over, on /metrics, in the janitor's warning and on the dashboard: a day,
// as SES's reviews look at recent sending.
const ReputationWindow = 24 * time.Hour

// Reasons lists the refusals' reasons in the order the dashboard shows
// them.
var Reasons = []string{Throttled, DomainBlocked, Suppressed, Validation}

// Store is where the counts go.
type Store interface {
	AddSendCounts(ctx context.Context, ts []store.Tally) error
}

// Counter counts sends and refusals per minute of its clock until Flush.
// It is a skuld.Observer for the outcomes; the API adds its refusals. It
// is safe for concurrent use.
type Counter struct {
	store Store
	clock clock.Clock

	mu      sync.Mutex
	pending map[key]int64
}

type key struct {
	minute time.Time
	kind   string
}

// New returns a Counter that adds to st, its minutes read on c.
func New(st Store, c clock.Clock) *Counter {
	return &Counter{store: st, clock: c, pending: map[key]int64{}}
}

// Add counts one of kind now.
func (c *Counter) Add(kind string) {
	k := key{c.clock.Now().UTC().Truncate(time.Minute), kind}
	c.mu.Lock()
	c.pending[k]++
	c.mu.Unlock()
}

// Flush adds the counts so far to the store. Counts it could not add are
// kept for the next Flush, so a database that is down for a while loses
// none while the server lives; a server killed loses at most the counts
// since its last Flush, about a second of them.
func (c *Counter) Flush(ctx context.Context) error {
	c.mu.Lock()
	if len(c.pending) == 0 {
		c.mu.Unlock()
		return nil
	}
	taken := c.pending
	c.pending = map[key]int64{}
	c.mu.Unlock()
	ts := make([]store.Tally, 0, len(taken))
	for k, n := range taken {
		ts = append(ts, store.Tally{Minute: k.minute, Kind: k.kind, N: n})
	}
	err := c.store.AddSendCounts(ctx, ts)
	if err != nil {
		c.mu.Lock()
		for k, n := range taken {
			c.pending[k] += n
		}
		c.mu.Unlock()
	}
	return err
}

// SendFinished implements skuld.Observer: one send's final outcome.
func (c *Counter) SendFinished(_, outcome, _ string) { c.Add(outcome) }

// Refused implements skuld.Observer. It counts nothing: a send the
// throttle refuses may still be accepted, queued; the API counts what it
// refuses (Add(Throttled)).
func (c *Counter) Refused([]throttle.Window) {}

// ProviderCall implements skuld.Observer; attempts are not charted.
func (c *Counter) ProviderCall(string, string, time.Duration) {}

// Retried implements skuld.Observer; retries are not charted.
func (c *Counter) Retried(string) {}

var _ skuld.Observer = (*Counter)(nil)
