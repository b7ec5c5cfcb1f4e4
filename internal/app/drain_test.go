package app

import (
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/config"
)

// The compose file gives the server longer than its longest drain before
// SIGKILL: a send in flight must never be cut off by the orchestrator
// (issue 15, item 7).
func TestComposeGracePeriodCoversTheLongestDrain(t *testing.T) {
	t.Parallel()
	cfg, err := config.LoadWith("", nil)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*stop_grace_period:\s*(\S+)`).FindAllSubmatch(raw, -1)
	if len(m) == 0 {
		t.Fatal("docker-compose.yml sets no stop_grace_period: Docker would SIGKILL after 10 s")
	}
	for _, g := range m {
		grace, err := time.ParseDuration(string(g[1]))
		if err != nil {
			t.Fatalf("stop_grace_period %q: %v", g[1], err)
		}
		if drain := LongestDrain(cfg); grace <= drain {
			t.Errorf("stop_grace_period %v is not longer than the longest drain with the defaults, %v", grace, drain)
		}
	}
}
