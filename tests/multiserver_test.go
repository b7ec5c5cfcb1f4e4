package tests

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// A second server with the in-memory throttle on a PostgreSQL database that
// one already serves would have a full quota of its own: it is refused at
// start-up, and told how to run several.
func TestSecondMemoryServerRefused(t *testing.T) {
	t.Parallel()
	mx := smtptest.Start(t)
	env := procEnv(t, "postgres", mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=5")
	first := startProc(t, env)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nornweaveBinary(t))
	cmd.Dir = t.TempDir()
	cmd.Env = append(env, fmt.Sprintf("PORT=%d", freePort(t)))
	out, err := cmd.CombinedOutput()
	if err == nil || ctx.Err() != nil {
		t.Fatalf("second server: exit %v (context %v), want a refusal\n%s", err, ctx.Err(), out)
	}
	if !strings.Contains(string(out), "THROTTLE_BACKEND") {
		t.Fatalf("second server's refusal does not name THROTTLE_BACKEND:\n%s", out)
	}

	// The lock is the first server's session: once it is gone, a server
	// starts again on the same database.
	first.kill(t)
	startProc(t, env)
}
