// Package redisthrottle keeps a shared throttle's state in Redis
// (THROTTLE_BACKEND=redis), shared by every server that uses the same Redis
// and key prefix. It is a throttledriver.Driver: each call is one Lua script
// (scripts.go), atomic in Redis and stamped by Redis's own TIME. New
// returns the shared.Throttle over it.
//
// Per scope (the global windows, or one inbox) it keeps four hashes of
// counted sends per bucket (the second, the minute, the hour, the day) and
// a sorted set of the reservations in flight scored by their deadline. An
// inbox's keys expire after an idle day (and its last bucket), so Redis
// follows the inboxes in use. Every key carries a marker of the
// state's generation, so that a key deleted or evicted on its own is
// found missing, not read as "no sends" (scripts.go). Every key of a
// deployment shares one hash tag, so Redis Cluster works.
package redisthrottle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/skuld/throttle/shared"
	"github.com/nornweave/nornweave/skuld/throttle/throttledriver"
)

// DefaultKeyPrefix starts every key unless Options says otherwise.
const DefaultKeyPrefix = "nornweave:throttle"

// New returns a shared throttle whose state lives in rdb under prefix ("":
// DefaultKeyPrefix). It starts the throttle's background work; Close stops
// it (rdb stays open: it is the caller's).
func New(rdb redis.UniversalClient, prefix string, o shared.Options) *shared.Throttle {
	return shared.New(newDriver(rdb, prefix), o)
}

// NewClient connects (lazily) to the Redis at url, a redis://, rediss://
// or unix:// URL, with timeouts short enough that an unreachable Redis
// turns into the fail policy within seconds, not a hung request.
func NewClient(url string) (*redis.Client, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("REDIS_URL: %w", err)
	}
	if o.DialTimeout == 0 || o.DialTimeout > 2*time.Second {
		o.DialTimeout = 2 * time.Second
	}
	if o.ReadTimeout == 0 || o.ReadTimeout > 2*time.Second {
		o.ReadTimeout, o.WriteTimeout = 2*time.Second, 2*time.Second
	}
	o.MaxRetries = 1
	return redis.NewClient(o), nil
}

type driver struct {
	rdb    redis.UniversalClient
	prefix string // "{KeyPrefix}": one hash tag
}

func newDriver(rdb redis.UniversalClient, prefix string) *driver {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	return &driver{rdb: rdb, prefix: "{" + prefix + "}"}
}

func (d *driver) Name() string { return "redis" }

// scopeKeys returns a scope's six keys, in the scripts' order: second,
// minute, hour and day buckets, flights, slots.
func (d *driver) scopeKeys(inbox string) []string {
	s := d.prefix + ":g"
	if inbox != "" {
		s = d.prefix + ":i:" + inbox
	}
	return []string{s + ":s", s + ":m", s + ":h", s + ":d", s + ":f", s + ":n"}
}

// scopeItems is the number of items of a scope's raw state in a reply:
// four bucket hashes, the flights, their slots.
const scopeItems = 6

func (d *driver) seq() string   { return d.prefix + ":seq" }
func (d *driver) state() string { return d.prefix + ":state" }

// inboxTTL is how long an inbox's keys outlive its last write: the day
// window, its last bucket (throttle.Longest), a minute's slack, and the
// lease. Shorter, and an inbox idle for hours would forget its day.
func inboxTTL(lease time.Duration) int64 {
	return (throttle.Longest + time.Minute + lease).Milliseconds()
}

// inboxes adds the keys of each distinct inbox to keys, in order of first
// appearance, and returns each inbox's 1-based index among them and the
// inboxes in that order.
func (d *driver) inboxes(keys []string, names []string) ([]string, map[string]int, []string) {
	idx := map[string]int{}
	var order []string
	for _, n := range names {
		if n == "" || idx[n] != 0 {
			continue
		}
		idx[n] = len(idx) + 1
		order = append(order, n)
		keys = append(keys, d.scopeKeys(n)...)
	}
	return keys, idx, order
}

// answer reads a script's reply for the state lost ({-1}) or incomplete
// ({-2, key}).
func answer(res []any) error {
	if len(res) == 0 {
		return errors.New("redisthrottle: empty reply")
	}
	switch v, _ := res[0].(int64); {
	case v == -1 && len(res) == 1:
		return throttledriver.ErrStateLost
	case v == -2 && len(res) == 2:
		return &throttledriver.IncompleteError{Part: fmt.Sprintf("the key %v", res[1])}
	}
	return nil
}

// Reserve implements throttledriver.Driver with one script call.
func (d *driver) Reserve(ctx context.Context, global throttle.Limits, asks []throttledriver.Ask) (*throttledriver.Batch, error) {
	names := make([]string, len(asks))
	for i, a := range asks {
		names[i] = a.Inbox
	}
	keys, idx, order := d.inboxes(append([]string{d.seq(), d.state()}, d.scopeKeys("")...), names)
	args := []any{global.PerSecond, global.PerMinute, global.PerHour, global.PerDay, len(order)}
	for _, n := range order {
		for _, a := range asks {
			if a.Inbox == n {
				args = append(args, n, inboxTTL(a.Lease))
				break
			}
		}
	}
	for _, a := range asks {
		args = append(args, idx[a.Inbox], a.Lease.Microseconds(), a.Limits.PerMinute, a.Limits.PerHour,
			a.Limits.PerDay, inboxTTL(a.Lease), a.Slots())
	}
	res, err := reserveScript.Run(ctx, d.rdb, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if err := answer(res); err != nil {
		return nil, err
	}
	b := &throttledriver.Batch{}
	if err := d.parse(res[:len(res)-1], names, idx, &b.Raw); err != nil {
		return nil, err
	}
	ids, _ := res[len(res)-1].([]any)
	if len(ids) != len(asks) {
		return nil, fmt.Errorf("redisthrottle: reserve answered %d verdicts for %d", len(ids), len(asks))
	}
	b.Verdicts = make([]throttledriver.Verdict, len(ids))
	for i, v := range ids {
		id, _ := v.(int64)
		b.Verdicts[i] = throttledriver.Verdict{Admitted: id > 0, ID: id}
	}
	return b, nil
}

// parse reads {now, global raw, inbox raws in index order} into raw.
func (d *driver) parse(res []any, names []string, idx map[string]int, raw *throttledriver.Raw) error {
	if len(res) != 1+scopeItems*(1+len(idx)) {
		return fmt.Errorf("redisthrottle: unexpected reply of %d items", len(res))
	}
	nowUS, ok := res[0].(int64)
	if !ok {
		return errors.New("redisthrottle: no time in reply")
	}
	raw.Now = nowUS * 1000
	g, err := parseScope(res[1 : 1+scopeItems])
	if err != nil {
		return err
	}
	raw.Global = *g
	raw.Inbox = make(map[string]*throttledriver.RawScope, len(idx))
	for _, n := range names {
		i := idx[n]
		if i == 0 || raw.Inbox[n] != nil {
			continue
		}
		if raw.Inbox[n], err = parseScope(res[1+scopeItems*i : 1+scopeItems*(i+1)]); err != nil {
			return err
		}
	}
	return nil
}

// parseScope reads a scope's raw state: second, minute, hour and day
// hashes, flights with scores, each a flat list, and the flights' slots.
func parseScope(res []any) (*throttledriver.RawScope, error) {
	s := &throttledriver.RawScope{}
	for j, dst := range []*[]throttledriver.Bucket{&s.Second, &s.Minute, &s.Hour, &s.Day} {
		kv, _ := res[j].([]any)
		for k := 0; k+1 < len(kv); k += 2 {
			b, err1 := strconv.ParseInt(fmt.Sprint(kv[k]), 10, 64)
			n, err2 := strconv.Atoi(fmt.Sprint(kv[k+1]))
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("redisthrottle: bad bucket %v=%v", kv[k], kv[k+1])
			}
			*dst = append(*dst, throttledriver.Bucket{Index: b, Sends: n})
		}
	}
	fl, _ := res[4].([]any)
	ns, _ := res[5].([]any)
	if len(ns) != len(fl)/2 {
		return nil, fmt.Errorf("redisthrottle: %d slot counts for %d flights", len(ns), len(fl)/2)
	}
	for k := 0; k+1 < len(fl); k += 2 {
		id, err1 := strconv.ParseInt(fmt.Sprint(fl[k]), 10, 64)
		dl, err2 := strconv.ParseFloat(fmt.Sprint(fl[k+1]), 64)
		n, _ := ns[k/2].(int64)
		if err1 != nil || err2 != nil || n < 1 {
			return nil, fmt.Errorf("redisthrottle: bad flight %v=%v (%v slots)", fl[k], fl[k+1], ns[k/2])
		}
		s.Flights = append(s.Flights, throttledriver.Flight{ID: id, Deadline: int64(dl) * 1000, N: int(n)})
	}
	return s, nil
}

// Settle implements throttledriver.Driver with one script call.
func (d *driver) Settle(ctx context.Context, ss []throttledriver.Settlement) error {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = s.Inbox
	}
	keys, idx, order := d.inboxes(append([]string{d.state()}, d.scopeKeys("")...), names)
	args := make([]any, 0, 1+len(order)+5*len(ss))
	args = append(args, len(order))
	for _, n := range order {
		args = append(args, n)
	}
	for _, s := range ss {
		commit := 0
		if s.Commit {
			commit = 1
		}
		args = append(args, s.ID, s.Age.Microseconds(), commit, idx[s.Inbox], inboxTTL(s.Lease))
	}
	// A state lost or incomplete takes no settlement: it is rebuilt from
	// the send record, which holds these sends, by the next admission.
	return settleScript.Run(ctx, d.rdb, keys, args...).Err()
}

// Read implements throttle.Driver with one script call.
func (d *driver) Read(ctx context.Context, inbox string) (*throttledriver.Raw, error) {
	keys, idx, order := d.inboxes(append([]string{d.state()}, d.scopeKeys("")...), []string{inbox})
	args := make([]any, len(order))
	for i, n := range order {
		args[i] = n
	}
	res, err := readScript.Run(ctx, d.rdb, keys, args...).Slice()
	if err != nil {
		return nil, err
	}
	if err := answer(res); err != nil {
		return nil, err
	}
	raw := &throttledriver.Raw{}
	if err := d.parse(res, []string{inbox}, idx, raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// Restore implements throttledriver.Driver. To replace, it first deletes every
// key of the prefix (SCAN, then DEL: not atomic, which is why replacing is
// for a moment when no other server uses this Redis), then writes the
// record in one script as for a lost state.
func (d *driver) Restore(ctx context.Context, rec throttledriver.Record, replace bool) (bool, error) {
	if replace {
		if err := d.deleteAll(ctx); err != nil {
			return false, err
		}
	}
	names := make([]string, 0, len(rec.Sent)+len(rec.Pending))
	for _, s := range rec.Sent {
		names = append(names, s.Inbox)
	}
	for _, p := range rec.Pending {
		names = append(names, p.Inbox)
	}
	keys, idx, order := d.inboxes(append([]string{d.seq(), d.state()}, d.scopeKeys("")...), names)
	longest := time.Duration(0)
	for _, p := range rec.Pending {
		longest = max(longest, time.Until(p.Deadline))
	}
	gen := make([]byte, 8)
	if _, err := rand.Read(gen); err != nil {
		return false, err
	}
	args := []any{hex.EncodeToString(gen), inboxTTL(longest), len(order)}
	for _, n := range order {
		args = append(args, n)
	}
	args = append(args, len(rec.Sent))
	for _, s := range rec.Sent {
		args = append(args, idx[s.Inbox], s.At.UnixMicro())
	}
	for _, p := range rec.Pending {
		args = append(args, idx[p.Inbox], p.Deadline.UnixMicro())
	}
	n, err := restoreScript.Run(ctx, d.rdb, keys, args...).Int()
	return n == 1, err
}

func (d *driver) deleteAll(ctx context.Context) error {
	iter := d.rdb.Scan(ctx, 0, d.prefix+":*", 500).Iterator()
	var batch []string
	for iter.Next(ctx) {
		if iter.Val() == identityKey(d.prefix) { // names the Redis, not the state
			continue
		}
		if batch = append(batch, iter.Val()); len(batch) == 500 {
			if err := d.rdb.Del(ctx, batch...).Err(); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(batch) > 0 {
		return d.rdb.Del(ctx, batch...).Err()
	}
	return nil
}
