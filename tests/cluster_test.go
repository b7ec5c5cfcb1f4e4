package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/nornweave/nornweave/internal/testkit/redistest"
	"github.com/nornweave/nornweave/internal/testkit/smtptest"
)

// sharedBackends are the throttle backends several servers share.
var sharedBackends = []string{"postgres", "redis"}

// clusterEnv is the environment of servers sharing one fresh PostgreSQL
// database and the throttle backend, sending to mx; for redis, under a key
// prefix of the test's own.
func clusterEnv(t *testing.T, backend string, mx *smtptest.Server, extra ...string) []string {
	extra = append(extra, "THROTTLE_BACKEND="+backend)
	if backend == "redis" {
		extra = append(extra, "REDIS_URL="+redistest.URL(), "REDIS_KEY_PREFIX="+redistest.Prefix(t))
	}
	return procEnv(t, "postgres", mx, extra...)
}

// startCluster starts n server processes on env.
func startCluster(t *testing.T, env []string, n int) []*proc {
	ps := make([]*proc, n)
	for i := range ps {
		ps[i] = startProc(t, env)
	}
	return ps
}

// blast posts n sends at once, send i through servers[i%len] from
// inboxes[i%len], and returns the statuses counted, and the 201s per inbox.
func blast(t *testing.T, servers []*proc, inboxes []string, n int) (map[int]int, map[string]int) {
	t.Helper()
	var (
		mu       sync.Mutex
		statuses = map[int]int{}
		perInbox = map[string]int{}
		wg       sync.WaitGroup
		start    = make(chan struct{})
	)
	client := &http.Client{Timeout: 2 * time.Minute}
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inbox := inboxes[i%len(inboxes)]
			body, _ := json.Marshal(map[string]any{"inbox_id": inbox, "to": []string{"bob@customer.test"},
				"subject": fmt.Sprint("Hello ", i), "body": "Hi"})
			<-start
			status := -1
			res, err := client.Post(servers[i%len(servers)].URL+"/v1/messages", "application/json", bytes.NewReader(body))
			if err == nil {
				status = res.StatusCode
				res.Body.Close()
			}
			mu.Lock()
			defer mu.Unlock()
			statuses[status]++
			if status == http.StatusCreated {
				perInbox[inbox]++
			}
		}()
	}
	close(start)
	wg.Wait()
	return statuses, perInbox
}

// Three servers on one database, 300 concurrent sends spread across them,
// a global limit of 20: exactly 20 reach the SMTP server.
func TestClusterKeepsGlobalLimit(t *testing.T) {
	// Not parallel: its three servers hold about 20 PostgreSQL connections (19–21 measured for such tests), two with the rest over the run's 45.
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			mx := smtptest.Start(t)
			servers := startCluster(t, clusterEnv(t, backend, mx, "GLOBAL_SEND_RATE_LIMIT_PER_MINUTE=20",
				"GLOBAL_SEND_RATE_LIMIT_PER_HOUR=1000"), 3)
			inbox := servers[0].createInbox(t, "support")

			statuses, _ := blast(t, servers, []string{inbox}, 300)
			if statuses[http.StatusCreated] != 20 || statuses[http.StatusTooManyRequests] != 280 {
				t.Fatalf("statuses %v, want 20×201 and 280×429", statuses)
			}
			if n := mx.Count(); n != 20 {
				t.Fatalf("%d messages at the SMTP server, want exactly 20", n)
			}
			// Every server sees the shared windows.
			for i, s := range servers {
				w := s.rateLimitWindow(t, "per_minute")
				if w["used"] != float64(20) || w["remaining"] != float64(0) {
					t.Errorf("server %d reports %v, want used 20, remaining 0", i, w)
				}
			}
		})
	}
}

// The same with per-inbox limits: four inboxes of 5 a minute, no global
// limit: exactly 5 from each reach the SMTP server.
func TestClusterKeepsInboxLimits(t *testing.T) {
	// Not parallel: its three servers hold about 20 PostgreSQL connections (19–21 measured for such tests), two with the rest over the run's 45.
	for _, backend := range sharedBackends {
		t.Run(backend, func(t *testing.T) {
			mx := smtptest.Start(t)
			servers := startCluster(t, clusterEnv(t, backend, mx, "INBOX_SEND_RATE_LIMIT_PER_MINUTE=5"), 3)
			var inboxes []string
			for i := range 4 {
				inboxes = append(inboxes, servers[i%3].createInbox(t, fmt.Sprint("box", i)))
			}
			statuses, perInbox := blast(t, servers, inboxes, 300)
			if statuses[http.StatusCreated] != 20 || statuses[http.StatusTooManyRequests] != 280 {
				t.Fatalf("statuses %v, want 20×201 and 280×429", statuses)
			}
			for _, in := range inboxes {
				if perInbox[in] != 5 {
					t.Errorf("inbox %s: %d sent, want 5 (all: %v)", in, perInbox[in], perInbox)
				}
			}
			if n := mx.Count(); n != 20 {
				t.Fatalf("%d messages at the SMTP server, want exactly 20", n)
			}
			// A PATCH on one server holds on the next send through the
			// others, which hold copies of the inbox from before: their
			// admission finds the copy stale and reads the inbox again.
			mustStatus(t, servers[0].do(t, "PATCH", "/v1/inboxes/"+inboxes[0],
				map[string]any{"rate_limit": map[string]any{"per_minute": 6}}), http.StatusOK)
			mustStatus(t, servers[1].send(t, inboxes[0], "bob@customer.test"), http.StatusCreated)
			mustStatus(t, servers[2].send(t, inboxes[0], "bob@customer.test"), http.StatusTooManyRequests)
			// Lowered, too: a copy with the old limit of 5 must not admit
			// a third send.
			fresh := servers[0].createInbox(t, "fresh")
			mustStatus(t, servers[1].send(t, fresh, "bob@customer.test"), http.StatusCreated)
			mustStatus(t, servers[2].send(t, fresh, "bob@customer.test"), http.StatusCreated)
			mustStatus(t, servers[0].do(t, "PATCH", "/v1/inboxes/"+fresh,
				map[string]any{"rate_limit": map[string]any{"per_minute": 2}}), http.StatusOK)
			mustStatus(t, servers[1].send(t, fresh, "bob@customer.test"), http.StatusTooManyRequests)
			mustStatus(t, servers[2].send(t, fresh, "bob@customer.test"), http.StatusTooManyRequests)
			// And deleted: the copies do not send for it.
			mustStatus(t, servers[0].do(t, "DELETE", "/v1/inboxes/"+fresh, nil), http.StatusNoContent)
			mustStatus(t, servers[1].send(t, fresh, "bob@customer.test"), http.StatusNotFound)
			if n := mx.Count(); n != 23 {
				t.Fatalf("%d messages at the SMTP server, want 23", n)
			}
		})
	}
}
