package tests

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// startRefused starts the binary with env and wants it to refuse: exit
// non-zero, soon, with each of want in its output.
func startRefused(t *testing.T, env []string, want ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nornweaveBinary(t))
	cmd.Dir = t.TempDir()
	cmd.Env = append(env, fmt.Sprintf("PORT=%d", freePort(t)))
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("server beside the others: exit %v (context %v), want a refusal\n%s", err, ctx.Err(), out)
	}
	text := strings.ReplaceAll(string(out), `\"`, `"`) // the JSON log escapes quotes
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Fatalf("refusal lacks %q:\n%s", w, out)
		}
	}
}

// redisDB is the test Redis's URL (REDIS_URL) on its database plus n (of
// Redis's default 16): 0 is REDIS_URL's own, 1 the next one.
func redisDB(t *testing.T, n int) string {
	u, err := url.Parse(redistest.URL())
	if err != nil {
		t.Fatal(err)
	}
	db, _ := strconv.Atoi(strings.TrimPrefix(u.Path, "/"))
	u.Path = fmt.Sprintf("/%d", (db+n)%16)
	return u.String()
}

// Servers that would not share one throttle do not run side by side on
// one database (issue 15, item 3): each was found sending the full limit.
func TestServersThatDoNotShareAThrottleAreRefused(t *testing.T) {
	t.Parallel() // mostly waiting: it runs beside TestSIGTERMWaitsForTheLongestLease
	t.Run("two memory servers on one SQLite file", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "sqlite", mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=3")
		first := startProc(t, env)
		inbox := first.createInbox(t, "support")
		mx.DelayDataReply(2 * time.Second)
		sent := make(chan response, 1)
		go func() { sent <- first.send(t, inbox, "bob@customer.test") }() // in flight meanwhile
		startRefused(t, env, "another NornWeave server is using this database")
		if r := <-sent; r.Status != http.StatusCreated || r.JSON(t)["status"] != "sent" {
			t.Fatalf("the first server's send in flight: %d %s; want 201 sent (not marked interrupted by the second's start)", r.Status, r.Body)
		}
	})
	t.Run("a memory server beside a postgres one", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=3")
		startProc(t, append(env, "THROTTLE_BACKEND=postgres"))
		startRefused(t, env, "another NornWeave server is using this database", "THROTTLE_BACKEND=postgres")
	})
	t.Run("a postgres server beside a memory one", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=3")
		startProc(t, env)
		startRefused(t, append(env, "THROTTLE_BACKEND=postgres"), "another NornWeave server is using this database")
	})
	t.Run("different limits", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=postgres", "INBOX_SEND_RATE_LIMIT_PER_HOUR=7")
		startProc(t, append(env, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=3"))
		startRefused(t, append(env, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=5"),
			`GLOBAL_SEND_RATE_LIMIT_PER_MINUTE is "5" here, but the servers running on this database use "3"`)
	})
	t.Run("different Redis databases", func(t *testing.T) {
		t.Parallel()
		mx := smtptest.Start(t)
		env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=redis", "REDIS_KEY_PREFIX="+redistest.Prefix(t),
			"GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10")
		theirs, mine := redisDB(t, 0), redisDB(t, 1)
		startProc(t, append(env, "REDIS_URL="+theirs))
		startRefused(t, append(env, "REDIS_URL="+mine), "REDIS_URL is", path.Base(mine)+"\" and REDIS_KEY_PREFIX",
			"/"+path.Base(theirs)+"\"", "this Redis has no throttle identity under this prefix")
	})
	for _, tt := range []struct{ variable, theirs, mine string }{
		{"SEND_TIMEOUT", "30s", "45s"},
		{"SEND_RETRY_DEADLINE", "10s", "20s"},
		{"THROTTLE_FAIL", "closed", "open"},
		{"ATTACHMENT_MAX_TOTAL_SIZE_MB", "35", "20"}, // the longest lease
		// The second and the day, which the shared backends keep too.
		{"GLOBAL_SEND_RATE_LIMIT_PER_SECOND", "5", "6"},
		{"GLOBAL_SEND_RATE_LIMIT_PER_DAY", "1000", "0"},
		{"INBOX_SEND_RATE_LIMIT_PER_DAY", "0", "50"},
	} {
		// What another server waits out (the lease) or does when the
		// backend is down (issue 27): refused as the limits are.
		t.Run("different "+tt.variable, func(t *testing.T) {
			t.Parallel()
			mx := smtptest.Start(t)
			env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=postgres")
			startProc(t, append(env, tt.variable+"="+tt.theirs))
			startRefused(t, append(env, tt.variable+"="+tt.mine),
				fmt.Sprintf(`%s is %q here, but the servers running on this database use %q`, tt.variable, tt.mine, tt.theirs))
			startProc(t, append(env, tt.variable+"="+tt.theirs))
		})
	}
}

// A deliberate change of limits (`nornweave limits set`, the day with the
// minute) reaches the running servers, which log it; a server started afterwards with the old
// value is told the new one.
func TestLimitsSetReachesRunningServers(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	env := procEnv(t, "postgres", mx, "THROTTLE_BACKEND=postgres", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=10")
	a, b := startProc(t, env), startProc(t, env)
	inbox := a.createInbox(t, "support")

	cmd := exec.Command(nornweaveBinary(t), "limits", "set", "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=2",
		"GLOBAL_SEND_RATE_LIMIT_PER_DAY=50")
	cmd.Dir, cmd.Env = t.TempDir(), env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=2") ||
		!strings.Contains(string(out), "GLOBAL_SEND_RATE_LIMIT_PER_DAY=50") {
		t.Fatalf("nornweave limits set: %v\n%s", err, out)
	}
	for _, p := range []*proc{a, b} {
		waitFor(t, 20*time.Second, func() bool { return strings.Contains(p.log.String(), `"msg":"throttle limits changed"`) })
	}
	var codes []int
	for i := range 3 {
		codes = append(codes, []*proc{a, b}[i%2].send(t, inbox, "bob@customer.test").Status)
	}
	if fmt.Sprint(codes) != "[201 201 429]" {
		t.Fatalf("three sends after the limit was set to 2: %v, want [201 201 429]", codes)
	}
	startRefused(t, env, `GLOBAL_SEND_RATE_LIMIT_PER_MINUTE is "10" here, but the servers running on this database use "2"`,
		`GLOBAL_SEND_RATE_LIMIT_PER_DAY is "0" here, but the servers running on this database use "50"`)
	startProc(t, append(env, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=2", "GLOBAL_SEND_RATE_LIMIT_PER_DAY=50"))
}
