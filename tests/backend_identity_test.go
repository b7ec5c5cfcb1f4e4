package tests

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// Servers share a throttle when they see the same backend, not the same
// REDIS_URL text (issue 27): the Redis keeps an identity of its own, which
// a joining server must read.
func TestServersAgreeOnTheBackendItself(t *testing.T) {
	t.Parallel() // mostly waiting for processes
	t.Run("two spellings of one Redis start together", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", "REDIS_KEY_PREFIX="+redistest.Prefix(t))
		startProc(t, append(env, "REDIS_URL="+redisDB(t, 0)))
		localhost, err := url.Parse(redisDB(t, 0))
		if err != nil {
			t.Fatal(err)
		}
		localhost.Host = strings.Replace(localhost.Host, "127.0.0.1", "localhost", 1)
		if localhost.String() == redisDB(t, 0) {
			t.Fatalf("REDIS_URL %s is not on 127.0.0.1: no second spelling to try", localhost)
		}
		startProc(t, append(env, "REDIS_URL="+localhost.String()))
	})
	t.Run("another Redis is refused", func(t *testing.T) {
		t.Parallel()
		port := freePort(t)
		startRedisServer(t, port)
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", "REDIS_KEY_PREFIX="+redistest.Prefix(t))
		startProc(t, append(env, "REDIS_URL="+redisDB(t, 0)))
		startRefused(t, append(env, fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port)),
			fmt.Sprintf(`REDIS_URL is "127.0.0.1:%d/0"`, port), "this Redis has no throttle identity under this prefix",
			"another Redis, another database number or another prefix")
	})
	t.Run("another prefix is refused", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		prefix := redistest.Prefix(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", "REDIS_URL="+redisDB(t, 0))
		startProc(t, append(env, "REDIS_KEY_PREFIX="+prefix))
		startRefused(t, append(env, "REDIS_KEY_PREFIX="+prefix+":b"),
			`REDIS_KEY_PREFIX "`+prefix+`:b" here`, "this Redis has no throttle identity under this prefix")
	})
	t.Run("postgres servers start together", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=postgres")
		startProc(t, env)
		startProc(t, env)
	})
}

// A Redis that lost its data (FLUSHDB) lost the identity too: the running
// servers write it back within a watcher's tick, so a server starting
// afterwards joins them.
func TestFlushedIdentityIsWrittenBack(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	startRedisServer(t, port)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer rdb.Close()
	mx := smtptest.Start(t)
	env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis",
		fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port), "REDIS_KEY_PREFIX=p")
	startProc(t, env)
	ctx := context.Background()
	const key = "{p}:identity"
	id, err := rdb.Get(ctx, key).Result()
	if err != nil {
		t.Fatalf("the first server wrote no identity: %v", err)
	}
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, func() bool { return rdb.Get(ctx, key).Val() != "" })
	if got := rdb.Get(ctx, key).Val(); got != id {
		t.Fatalf("identity written back = %q, want the one recorded, %q", got, id)
	}
	startProc(t, env)
}

// A Redis that may evict keys loses throttle state when it does: refused
// at start, and by `nornweave check`, unless REDIS_ALLOW_EVICTION=true;
// noeviction starts.
func TestRedisThatMayEvictIsRefused(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	startRedisServer(t, port)
	policy := func(p string) {
		t.Helper()
		out, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "CONFIG", "SET", "maxmemory-policy", p).CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli CONFIG SET maxmemory-policy %s: %v %s", p, err, out)
		}
	}
	mx := smtptest.Start(t)
	redisEnv := []string{"THROTTLE_BACKEND=redis", fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port)}

	policy("allkeys-lru")
	startRefused(t, procEnv(t, "postgres", mx, redisEnv...),
		`maxmemory-policy is "allkeys-lru"`, "Set maxmemory-policy noeviction", "REDIS_ALLOW_EVICTION=true")
	cmd := exec.Command(nornweaveBinary(t), "check")
	cmd.Dir, cmd.Env = t.TempDir(), procEnv(t, "postgres", mx, redisEnv...)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "FAIL  throttle redis") ||
		!strings.Contains(string(out), "maxmemory-policy allkeys-lru") {
		t.Errorf("nornweave check on allkeys-lru: %v, want a FAIL line naming the policy:\n%s", err, out)
	}
	p := startProc(t, procEnv(t, "postgres", mx, append(redisEnv, "REDIS_ALLOW_EVICTION=true", "REDIS_KEY_PREFIX=allowed")...))
	if !strings.Contains(p.log.String(), "redis may evict the throttle's keys") {
		t.Errorf("start with REDIS_ALLOW_EVICTION=true does not warn:\n%s", p.log.String())
	}
	policy("noeviction")
	startProc(t, procEnv(t, "postgres", mx, append(redisEnv, "REDIS_KEY_PREFIX=noeviction")...))
}

// A Redis that refuses CONFIG (as some managed ones do) cannot say its
// eviction policy: the server starts, and it and `nornweave check` warn,
// saying what to check.
func TestRedisWithoutConfigWarns(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	startRedisServer(t, port, "--rename-command", "CONFIG", "")
	mx := smtptest.Start(t)
	env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port))
	const what = "check its maxmemory-policy in your provider's settings; it must be noeviction"
	if p := startProc(t, env); !strings.Contains(p.log.String(), what) {
		t.Errorf("start without CONFIG does not say what to check:\n%s", p.log.String())
	}
	cmd := exec.Command(nornweaveBinary(t), "check")
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, _ := cmd.CombinedOutput()
	if !strings.Contains(string(out), "WARN  throttle redis") || !strings.Contains(string(out), what) {
		t.Errorf("nornweave check without CONFIG: want a WARN line saying what to check:\n%s", out)
	}
}

// A server alone on its database compares the backend itself with the one
// recorded: the same Redis spelled another way keeps its state; another
// Redis is a move, whose state is rebuilt from the send record.
func TestServerAloneRebuildsOnlyOnAnotherBackend(t *testing.T) {
	t.Parallel()
	portA, portB := freePort(t), freePort(t)
	startRedisServer(t, portA)
	startRedisServer(t, portB)
	mx := smtptest.Start(t)
	env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis")
	const rebuilt, changed = "throttle state rebuilt from the database's send record", "throttle backend changed at start-up"
	for _, step := range []struct {
		url           string
		wantRebuilt   bool
		wantChangeLog bool
	}{
		{fmt.Sprintf("redis://127.0.0.1:%d/0", portA), true, false}, // the first start: nothing recorded
		{fmt.Sprintf("redis://localhost:%d/0", portA), false, false},
		{fmt.Sprintf("redis://127.0.0.1:%d/0", portB), true, true},
	} {
		p := startProc(t, append(env, "REDIS_URL="+step.url))
		log := p.log.String()
		p.kill(t) // its lock on the database dies with it
		if strings.Contains(log, rebuilt) != step.wantRebuilt || strings.Contains(log, changed) != step.wantChangeLog {
			t.Fatalf("start alone on %s: rebuilt %t, change logged %t; want %t, %t\n%s", step.url,
				strings.Contains(log, rebuilt), strings.Contains(log, changed), step.wantRebuilt, step.wantChangeLog, log)
		}
	}
}
