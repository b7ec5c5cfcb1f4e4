package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// One server is killed (SIGKILL) while it holds reservations whose sends
// reached the SMTP server but were never answered: the other server counts
// them as in flight, then — once their lease (SEND_RETRY_DEADLINE +
// SEND_TIMEOUT + the backend's 5 s margin) has run out — as sent at their
// deadline, and the slots come back a window later: never before a send
// made at the last moment of its lease could have left the window.
//
// The backends stamp time with their own clocks, so it waits out a real
// lease, short here (SEND_TIMEOUT=5s), and a real minute: about 75 s, both
// backends in parallel. It is the suite's one real-minute test of each
// shared backend.
func TestClusterCrashReclaimsAfterLease(t *testing.T) {
	t.Parallel() // four idle servers, a few connections each: it waits out a real lease and minute beside the others
	const (
		limit      = 5
		held       = 3
		leaseFloor = 1*time.Second + 5*time.Second + 5*time.Second // retry deadline + attempt + margin
	)
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			mx := smtptest.Start(t)
			env := clusterEnv(t, backend, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE="+strconv.Itoa(limit),
				"SEND_RETRY_DEADLINE=1s", "SEND_RETRY_MAX=0", "SEND_TIMEOUT=5s")
			victim, survivor := startProc(t, env), startProc(t, env)
			inbox := survivor.createInbox(t, "support")

			mx.DelayDataReply(10 * time.Minute) // taken, never answered
			t0 := time.Now()
			for i := range held {
				go func() {
					body, _ := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"},
						"subject": fmt.Sprint("held ", i), "body": "Hi"})
					res, err := http.Post(victim.URL+"/v1/messages", "application/json", bytes.NewReader(body))
					if err == nil {
						res.Body.Close()
					}
				}()
			}
			waitFor(t, 30*time.Second, func() bool { return mx.Count() == held })
			waitFor(t, 30*time.Second, func() bool {
				return survivor.rateLimitWindow(t, "per_minute")["in_flight"] == float64(held)
			})
			victim.kill(t)
			mx.DelayDataReply(0)

			safe := t0.Add(leaseFloor + time.Minute)
			sawCounted := false
			deadline := safe.Add(30 * time.Second)
			for {
				w := survivor.rateLimitWindow(t, "per_minute")
				after := time.Now()
				remaining, used, inFlight := w["remaining"], w["used"], w["in_flight"]
				// Before safe, every dead send still counts; after it they
				// leave, each with its own bucket.
				if after.Before(safe) && remaining != float64(limit-held) {
					t.Fatalf("window %v at %v, want %d remaining until %v: a slot came back too soon",
						w, after.Sub(t0), limit-held, safe.Sub(t0))
				}
				if remaining == float64(limit) {
					break
				}
				if used == float64(held) && inFlight == float64(0) {
					sawCounted = true // reclaimed: counted at the deadline
				}
				if after.After(deadline) {
					t.Fatalf("slots still taken %v after the first send: %v", after.Sub(t0), w)
				}
				time.Sleep(time.Second)
			}
			if !sawCounted {
				t.Errorf("never saw the dead reservations counted as sent (used %d, in flight 0)", held)
			}
			t.Logf("slots back %v after the first send (safe from %v)", time.Since(t0).Round(time.Second), safe.Sub(t0))
			for range limit {
				mustStatus(t, survivor.send(t, inbox, "bob@customer.test"), http.StatusCreated)
			}
			mustStatus(t, survivor.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
		})
	}
}

// Redis stops mid-run: the server with THROTTLE_FAIL=closed answers 503
// with Retry-After and sends nothing; the one with open sends and logs an
// ERROR; when Redis is back, both are throttled again. Every 201 reached the
// SMTP server and no 503 did. The two servers differ in THROTTLE_FAIL, so
// they cannot share a database (issue 27): each has its own database and
// key prefix on the one Redis.
func TestClusterRedisDownFailPolicy(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestSIGTERMWaitsForTheLongestLease
	port := freePort(t)
	startRedis := func() *exec.Cmd { return startRedisServer(t, port) }
	redisProc := startRedis()

	mx := smtptest.Start(t)
	env := func(policy string) []string {
		return procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", "THROTTLE_FAIL="+policy,
			fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port), "REDIS_KEY_PREFIX="+policy,
			"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=100")
	}
	closed, open := startProc(t, env("closed")), startProc(t, env("open"))
	inbox, openInbox := closed.createInbox(t, "support"), open.createInbox(t, "support")
	mustStatus(t, closed.send(t, inbox, "bob@customer.test"), http.StatusCreated)
	mustStatus(t, open.send(t, openInbox, "bob@customer.test"), http.StatusCreated)

	redisProc.Process.Kill()
	redisProc.Wait()

	r := closed.send(t, inbox, "bob@customer.test")
	mustStatus(t, r, http.StatusServiceUnavailable)
	if r.Header.Get("Retry-After") == "" || r.JSON(t)["code"] != "throttle_unavailable" {
		t.Errorf("503 without Retry-After or code: %v %s", r.Header, r.Body)
	}
	mustStatus(t, closed.do(t, "GET", "/v1/rate-limit", nil), http.StatusServiceUnavailable)
	// Readiness says so (issue 15, item 9): a server whose every send
	// would get 503 is not ready; one under THROTTLE_FAIL=open still is.
	for _, c := range []struct {
		p      *proc
		status int
	}{{closed, http.StatusServiceUnavailable}, {open, http.StatusOK}} {
		r := c.p.do(t, "GET", "/ready", nil)
		mustStatus(t, r, c.status)
		if checks, _ := r.JSON(t)["checks"].(map[string]any); checks["throttle"] != "unreachable" {
			t.Errorf("/ready checks = %v, want the throttle unreachable", checks)
		}
	}
	if m := closed.do(t, "GET", "/metrics", nil); !strings.Contains(string(m.Body), `nornweave_throttle_backend_up{backend="redis"} 0`) {
		t.Errorf("metrics lack the backend down:\n%s", m.Body)
	}
	mustStatus(t, open.send(t, openInbox, "bob@customer.test"), http.StatusCreated)
	if !strings.Contains(open.log.String(), `"level":"ERROR","msg":"throttle backend unreachable; sending unthrottled`) {
		t.Errorf("fail-open send not logged at ERROR:\n%s", open.log.String())
	}
	if m := open.do(t, "GET", "/metrics", nil); !strings.Contains(string(m.Body), "nornweave_throttle_unthrottled_sends_total 1") {
		t.Errorf("metrics lack the send admitted unthrottled:\n%s", m.Body)
	}
	if n := mx.Count(); n != 3 {
		t.Fatalf("%d messages at the SMTP server, want 3 (the 201s only)", n)
	}

	startRedis()
	waitFor(t, 30*time.Second, func() bool {
		return closed.send(t, inbox, "bob@customer.test").Status == http.StatusCreated
	})
	mustStatus(t, open.send(t, openInbox, "bob@customer.test"), http.StatusCreated)
	// Redis came back empty (no persistence): each state is rebuilt from
	// its database's send record before anything is admitted, so the sends
	// from before (the unthrottled one too) still count. A commit that was
	// on its way when Redis went may count twice: the safe side.
	for _, c := range []struct {
		name string
		p    *proc
		want float64
	}{{"closed", closed, 2}, {"open", open, 3}} {
		w := c.p.rateLimitWindow(t, "per_minute")
		if used, _ := w["used"].(float64); used < c.want {
			t.Errorf("%s, after Redis is back: %v, want its earlier sends and the new one (used ≥ %v)", c.name, w, c.want)
		}
	}
	if n := mx.Count(); n != 5 {
		t.Fatalf("%d messages at the SMTP server, want 5", n)
	}
}

// waitFor polls cond every 100 ms until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	if !waitUntil(d, cond) {
		t.Fatalf("condition not met within %v", d)
	}
}

// waitUntil polls cond every 100 ms until it holds (true) or d passes.
func waitUntil(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(100 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// startRedisServer runs a Redis of the test's own on port, keeping nothing
// on disk, with extra options ("--maxmemory-policy", "allkeys-lru"), until
// the test ends.
func startRedisServer(t *testing.T, port int, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("redis-server", append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port),
		"--save", "", "--appendonly", "no"}, extra...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server (install it with scripts/ensure-redis.sh): %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return cmd
		}
		if time.Now().After(end) {
			t.Fatalf("redis-server on port %d never answered", port)
		}
	}
}

// A Redis that lost its data (FLUSHDB, a restart without persistence) is
// noticed: the state is rebuilt from the database's send record before
// anything more is admitted, and the loss is logged at ERROR (issue 15,
// item 6: after a FLUSHDB, 5 more were admitted at a limit of 5, and
// nothing was logged).
func TestRedisFlushIsRebuiltFromTheSendRecord(t *testing.T) {
	t.Parallel()
	port := freePort(t)
	startRedisServer(t, port)
	mx := smtptest.Start(t)
	p := startProc(t, procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis",
		fmt.Sprintf("REDIS_URL=redis://127.0.0.1:%d/0", port), "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=5"))
	inbox := p.createInbox(t, "support")
	for range 5 {
		mustStatus(t, p.send(t, inbox, "bob@customer.test"), http.StatusCreated)
	}
	if out, err := exec.Command("redis-cli", "-p", strconv.Itoa(port), "FLUSHDB").CombinedOutput(); err != nil {
		t.Fatalf("redis-cli FLUSHDB: %v %s", err, out)
	}
	for range 5 {
		mustStatus(t, p.send(t, inbox, "bob@customer.test"), http.StatusTooManyRequests)
	}
	if n := mx.Count(); n != 5 {
		t.Fatalf("%d messages at the SMTP server, want the 5 from before the flush only", n)
	}
	if !strings.Contains(p.log.String(), `"level":"ERROR","msg":"throttle state vanished`) {
		t.Errorf("the loss was not logged at ERROR:\n%s", p.log.String())
	}
}
