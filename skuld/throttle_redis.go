package skuld

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisThrottle is a Throttle whose windows live in Redis, shared by every
// server that uses the same Redis and key prefix. Each reserve, commit and
// release is one Lua script, atomic in Redis, stamped by Redis's own TIME.
//
// Per scope (the global windows, or one inbox) it keeps two hashes of
// counted sends per bucket (1 s and 1 min buckets) and a sorted set of the
// reservations in flight scored by their deadline. A script that meets a
// reservation past its deadline (its server died) counts it at the deadline
// and removes it. An inbox's keys expire after an idle hour, so Redis
// follows the inboxes in use.
//
// It is safe for concurrent use, by goroutines and by servers.
type RedisThrottle struct {
	rdb    redis.UniversalClient
	prefix string
	limits sharedLimits
	margin time.Duration
	offset func() time.Duration
	// settles gathers commits and releases (see settles).
	settles *settles
}

// RedisOptions configures a RedisThrottle.
type RedisOptions struct {
	Global, Inbox Limits        // the global limits and the inbox defaults
	KeyPrefix     string        // every key starts with it; "" is "nornweave:throttle"
	LeaseMargin   time.Duration // 0: DefaultLeaseMargin
	// SettleDelay is how long commits and releases far from every limit
	// are gathered before they are sent together; 0: settleDelay.
	SettleDelay time.Duration
	// ClockOffset, if set, is added to Redis's clock at every reading;
	// for tests only.
	ClockOffset func() time.Duration
}

// NewRedisClient connects (lazily) to the Redis at url, a redis://,
// rediss:// or unix:// URL, with timeouts short enough that an unreachable
// Redis turns into the fail policy within seconds, not a hung request.
func NewRedisClient(url string) (*redis.Client, error) {
	o, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("skuld: REDIS_URL: %w", err)
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

// NewRedisThrottle returns a RedisThrottle over rdb.
func NewRedisThrottle(rdb redis.UniversalClient, o RedisOptions) *RedisThrottle {
	if o.LeaseMargin <= 0 {
		o.LeaseMargin = DefaultLeaseMargin
	}
	if o.KeyPrefix == "" {
		o.KeyPrefix = "nornweave:throttle"
	}
	// One hash tag: every key of a deployment in one Cluster slot, as a
	// script touching several keys needs.
	r := &RedisThrottle{rdb: rdb, prefix: "{" + o.KeyPrefix + "}", limits: newSharedLimits(o.Global, o.Inbox),
		margin: o.LeaseMargin, offset: o.ClockOffset}
	r.settles = newSettles(o.SettleDelay, o.ClockOffset, r.settle)
	return r
}

// keys returns a scope's three keys: minute buckets, hour buckets,
// reservations.
func (r *RedisThrottle) keys(inboxID string) []string {
	s := r.prefix + ":g"
	if inboxID != "" {
		s = r.prefix + ":i:" + inboxID
	}
	return []string{s + ":m", s + ":h", s + ":r"}
}

// scopeKeys returns the reservation sequence, the version of the inboxes,
// and the keys of the global scope and inboxID's ("" for none).
func (r *RedisThrottle) scopeKeys(inboxID string) []string {
	k := append([]string{r.prefix + ":seq", r.prefix + ":inbox-version"}, r.keys("")...)
	if inboxID != "" {
		k = append(k, r.keys(inboxID)...)
	}
	return k
}

func (r *RedisThrottle) offsetMicros() int64 {
	if r.offset == nil {
		return 0
	}
	return r.offset().Microseconds()
}

// inboxTTL is how long an inbox's keys outlive its last write: the hour
// window, its last bucket, and the longest lease.
func inboxTTL(lease time.Duration) int64 {
	return (time.Hour + 2*time.Minute + lease).Milliseconds()
}

func (r *RedisThrottle) unavailable(err error) error {
	return &UnavailableError{Backend: "redis", Err: err}
}

// ReserveInbox implements Throttle.
func (r *RedisThrottle) ReserveInbox(ctx context.Context, lease time.Duration, inboxID string, o Override) (Ticket, error) {
	lim := r.limits.inbox.with(o)
	full := max(lease, 0) + r.margin
	res, err := reserveScript.Run(ctx, r.rdb, r.scopeKeys(inboxID), r.offsetMicros(), full.Microseconds(),
		r.limits.global.PerMinute, r.limits.global.PerHour, lim.PerMinute, lim.PerHour, inboxTTL(full),
		o.Version, newVersion()).Slice()
	if err != nil {
		return nil, r.unavailable(err)
	}
	switch v, _ := res[0].(int64); {
	case v == 1:
		tk, err := r.ticket(res, inboxID, lim, inboxTTL(full))
		if err != nil {
			return nil, err
		}
		r.settles.saw(tk.a)
		return tk, nil
	case v == 2:
		return nil, ErrStaleInbox
	case len(res) < 2:
		return nil, r.unavailable(fmt.Errorf("reserve script returned %v", res))
	}
	r.settles.saw(nil)
	now, g, in, err := parseScopes(res[1:])
	if err != nil {
		return nil, r.unavailable(err)
	}
	// Commits of this server's still gathered would count as sends in
	// flight that may go out at their deadlines: send them, and compute
	// Retry-After from what Redis holds then.
	if sent, err := r.settles.flushed(ctx); err != nil {
		return nil, r.unavailable(err)
	} else if sent {
		if now, g, in, err = r.read(ctx, inboxID); err != nil {
			return nil, r.unavailable(err)
		}
	}
	gw := g.windows(now, r.limits.global)
	var iw *windows
	if inboxID != "" {
		iw = in.windows(now, lim)
	}
	if rl := judge(now, gw, iw); rl != nil {
		return nil, rl
	}
	// The script and the windows apply the same bucket rule; reaching
	// here would be a bug in one of them. Refuse for the least time.
	return nil, &RateLimitedError{RetryAfter: time.Second,
		Violations: []Violation{{Window: "per-minute", Limit: r.limits.global.PerMinute, RetryAfter: time.Second}}}
}

// newVersion is a version of the inboxes no server has seen: random, so
// that one set after Redis lost its data never equals one from before. A
// reserve passes one in case the version is missing, so it is cheap:
// 64 random bits, not a crypto/rand read per send.
func newVersion() string { return strconv.FormatUint(rand.Uint64(), 36) }

// InboxVersion implements Throttle.
func (r *RedisThrottle) InboxVersion(ctx context.Context) (string, error) {
	keys := r.scopeKeys("")[:2]
	v, err := versionScript.Run(ctx, r.rdb, keys, newVersion()).Text()
	if err != nil {
		return "", r.unavailable(err)
	}
	return v, nil
}

// InboxesChanged implements Throttle: Redis does not see the database, so
// the server that changed an inbox moves the version, after its commit.
func (r *RedisThrottle) InboxesChanged(ctx context.Context) error {
	if err := r.rdb.Set(ctx, r.scopeKeys("")[1], newVersion(), 0).Err(); err != nil {
		return r.unavailable(err)
	}
	return nil
}

// State implements Throttle.
func (r *RedisThrottle) State(ctx context.Context) (State, error) {
	return r.state(ctx, "", r.limits.global)
}

// InboxState implements Throttle.
func (r *RedisThrottle) InboxState(ctx context.Context, inboxID string, o Override) (State, error) {
	return r.state(ctx, inboxID, r.limits.inbox.with(o))
}

func (r *RedisThrottle) state(ctx context.Context, inboxID string, lim Limits) (State, error) {
	// This server's own commits and releases are seen by its reads.
	if err := r.settles.flush(ctx); err != nil {
		return State{}, r.unavailable(err)
	}
	now, g, in, err := r.read(ctx, inboxID)
	if err != nil {
		return State{}, r.unavailable(err)
	}
	if inboxID != "" {
		g = in
	}
	return g.windows(now, lim).state(now), nil
}

// States implements Throttle: both scopes in one script call.
func (r *RedisThrottle) States(ctx context.Context, inboxID string, o Override) (State, State, error) {
	if err := r.settles.flush(ctx); err != nil {
		return State{}, State{}, r.unavailable(err)
	}
	now, g, in, err := r.read(ctx, inboxID)
	if err != nil {
		return State{}, State{}, r.unavailable(err)
	}
	return g.windows(now, r.limits.global).state(now), in.windows(now, r.limits.inbox.with(o)).state(now), nil
}

// read reads the global scope and inboxID's ("" for none) in one script.
func (r *RedisThrottle) read(ctx context.Context, inboxID string) (int64, *scopeState, *scopeState, error) {
	keys := r.keys("")
	if inboxID != "" {
		keys = append(keys, r.keys(inboxID)...)
	}
	res, err := stateScript.Run(ctx, r.rdb, keys, r.offsetMicros()).Slice()
	if err != nil {
		return 0, nil, nil, err
	}
	return parseScopes(res)
}

// parseScopes reads now (µs) and one or two scopes' raw state — minute
// hash, hour hash, reservations with scores, each a flat list — as the
// scripts return them; now comes back in ns.
func parseScopes(res []any) (int64, *scopeState, *scopeState, error) {
	if len(res) != 4 && len(res) != 7 {
		return 0, nil, nil, fmt.Errorf("redis throttle: unexpected reply of %d items", len(res))
	}
	nowUS, ok := res[0].(int64)
	if !ok {
		return 0, nil, nil, errors.New("redis throttle: no time in reply")
	}
	scopes := [2]*scopeState{newScopeState(), newScopeState()}
	for i := 0; 1+3*i < len(res); i++ {
		s := scopes[i]
		for j, dst := range []map[int64]int{s.minute, s.hour} {
			kv, _ := res[1+3*i+j].([]any)
			for k := 0; k+1 < len(kv); k += 2 {
				b, err1 := strconv.ParseInt(fmt.Sprint(kv[k]), 10, 64)
				n, err2 := strconv.Atoi(fmt.Sprint(kv[k+1]))
				if err1 != nil || err2 != nil {
					return 0, nil, nil, fmt.Errorf("redis throttle: bad bucket %v=%v", kv[k], kv[k+1])
				}
				dst[b] += n
			}
		}
		zs, _ := res[3+3*i].([]any)
		for k := 0; k+1 < len(zs); k += 2 {
			d, err := strconv.ParseFloat(fmt.Sprint(zs[k+1]), 64)
			if err != nil {
				return 0, nil, nil, fmt.Errorf("redis throttle: bad deadline %v", zs[k+1])
			}
			s.deadlines = append(s.deadlines, int64(d)*1000)
		}
	}
	return nowUS * 1000, scopes[0], scopes[1], nil
}

// ticket reads an admission's reply: {1, now µs, id, global summary,
// [inbox summary]}, each summary {minute sends, hour sends, oldest minute
// bucket, oldest hour bucket (-1: none), in flight}.
func (r *RedisThrottle) ticket(res []any, inboxID string, lim Limits, ttl int64) (*redisTicket, error) {
	if len(res) < 4 {
		return nil, r.unavailable(fmt.Errorf("reserve script returned %v", res))
	}
	nowUS, _ := res[1].(int64)
	id, _ := res[2].(int64)
	a := &admission{now: nowUS * 1000, limits: [2]Limits{r.limits.global, lim}, inboxScope: inboxID != ""}
	for i, dst := range []*scopeSummary{&a.global, &a.inbox} {
		if 3+i >= len(res) {
			break
		}
		v, _ := res[3+i].([]any)
		if len(v) != 5 {
			return nil, r.unavailable(fmt.Errorf("reserve script returned summary %v", v))
		}
		var n [5]int64
		for j := range v {
			n[j], _ = v[j].(int64)
		}
		*dst = scopeSummary{
			minute:   windowSummary{used: int(n[0]), oldest: n[2], hasOldest: n[2] >= 0},
			hour:     windowSummary{used: int(n[1]), oldest: n[3], hasOldest: n[3] >= 0},
			inFlight: int(n[4]),
		}
	}
	return &redisTicket{r: r, id: id, inboxID: inboxID, ttl: ttl, a: a}, nil
}

type redisTicket struct {
	r       *RedisThrottle
	id      int64
	inboxID string
	ttl     int64
	a       *admission
}

// Commit counts the send at the moment of the call in every scope where
// it is still in flight, gathered with others or at once (see settles);
// one reclaimed after its lease was counted then.
func (t *redisTicket) Commit(ctx context.Context) error {
	return t.r.settled(ctx, t, true)
}

// Release removes the reservation from every scope, gathered or at once.
func (t *redisTicket) Release(ctx context.Context) error {
	return t.r.settled(ctx, t, false)
}

func (r *RedisThrottle) settled(ctx context.Context, t *redisTicket, commit bool) error {
	if err := r.settles.settle(ctx, settled{id: t.id, inboxID: t.inboxID, commit: commit, ttl: t.ttl},
		t.a.nearLimit()); err != nil {
		return r.unavailable(err)
	}
	return nil
}

// settle sends a batch of commits and releases in one script call.
func (r *RedisThrottle) settle(ctx context.Context, now int64, batch []settled) error {
	keys := r.keys("")
	first := map[string]int{} // inbox → index in keys of its first key, 1-based
	args := []any{r.offsetMicros(), int64(0)}
	var ttl int64
	for _, x := range batch {
		ik := 0
		if x.inboxID != "" {
			if ik = first[x.inboxID]; ik == 0 {
				ik = len(keys) + 1
				first[x.inboxID] = ik
				keys = append(keys, r.keys(x.inboxID)...)
			}
		}
		flag := 0
		if x.commit {
			flag = 1
		}
		ttl = max(ttl, x.ttl)
		args = append(args, x.id, (now-x.at)/1000, flag, ik)
	}
	args[1] = ttl
	return settleScript.Run(ctx, r.rdb, keys, args...).Err()
}

// Flush sends this server's pending commits and releases now; call it
// before closing the client.
func (r *RedisThrottle) Flush(ctx context.Context) error {
	if err := r.settles.flush(ctx); err != nil {
		return r.unavailable(err)
	}
	return nil
}

func (t *redisTicket) MinuteCount() int { return t.a.minuteCount() }
func (t *redisTicket) HourCount() int   { return t.a.hourCount() }

// States implements Ticket, from what the admission read.
func (t *redisTicket) States(counted bool) (State, State, bool) { return t.a.states(counted) }
