package tests

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// statements records the statements a Store runs while it listens.
type statements struct {
	mu     sync.Mutex
	listen bool
	sql    []string
}

func (s *statements) trace(_ context.Context, sql string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listen {
		s.sql = append(s.sql, sql)
	}
}

// during returns the statements run by f.
func (s *statements) during(f func()) []string {
	s.mu.Lock()
	s.listen, s.sql = true, nil
	s.mu.Unlock()
	f()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listen = false
	return s.sql
}

// loadsInbox matches a statement that loads an inbox: a SELECT from the
// inboxes table. The record of a send checks its inbox in the same
// transaction (a key-share lock on PostgreSQL; on a shared database, that
// the copy it was judged by still holds, store.judgedGuard): that is part
// of the write, not a read of the inbox, and is not counted.
var loadsInbox = regexp.MustCompile("(?is)^\\s*SELECT\\s+(?:[^(]*?\\s)?FROM\\s+[`\"]?inboxes\\b")

// okProvider accepts every message.
type okProvider struct{}

func (okProvider) Name() string { return "ok" }
func (okProvider) Send(context.Context, providers.Message) (string, error) {
	return "<ok@provider.test>", nil
}

// TestSendReadsTheInboxOnce counts the statements of one POST /v1/messages
// on the real store: the send is judged by the inbox it loaded, and its
// answer's rate-limit headers are the windows of that same inbox, so the
// inbox is loaded exactly once — a send, one refused by the domain filter,
// one with an Idempotency-Key and that key's replay — whether the server
// is the database's only one (which caches its inboxes) or shares it. Each
// request goes to a server just started, which has not read the inbox yet:
// the most a request can cost.
func TestSendReadsTheInboxOnce(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		for _, shared := range []bool{false, true} {
			name := "alone"
			if shared {
				name = "shared"
			}
			t.Run(name, func(t *testing.T) {
				cfg := apptest.Config(t, driver)
				o := store.Options{Driver: driver, DSN: cfg.SQLitePath()}
				if driver == store.DriverPostgres {
					o.DSN = cfg.PostgresURL()
				}
				var stmts statements
				o.Trace = stmts.trace
				policy, err := filter.New("", `blocked\.test`)
				if err != nil {
					t.Fatal(err)
				}
				// One throttle for every server, as a shared one is.
				lim := throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 100},
					throttle.Limits{PerMinute: 10}), clock.NewSystem())
				start := func() *server {
					st, err := store.Open(context.Background(), o)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { st.Close() })
					if err := st.Migrate(context.Background()); err != nil {
						t.Fatal(err)
					}
					if shared {
						st.ShareDatabase()
					}
					sender := skuld.NewSender(skuld.Options{Store: st, Provider: okProvider{}, Throttle: lim, Filter: policy})
					srv := httptest.NewServer(api.New(api.Options{Store: st, Sender: sender, Throttle: lim,
						EmailDomain: "acme.test", AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20,
						AttachmentMaxCount: 1}))
					t.Cleanup(srv.Close)
					return &server{Server: &apptest.Server{URL: srv.URL}}
				}
				inbox := start().createInbox(t, "support")

				for _, tc := range []struct {
					name, to string
					headers  []string
					want     int
				}{
					{"direct", "bob@customer.test", nil, http.StatusCreated},
					{"blocked", "bob@blocked.test", nil, http.StatusForbidden},
					{"with a key", "bob@customer.test", []string{"Idempotency-Key", "k-1"}, http.StatusCreated},
					{"replay", "bob@customer.test", []string{"Idempotency-Key", "k-1"}, http.StatusCreated},
				} {
					s := start()
					var r response
					sql := stmts.during(func() {
						r = s.do(t, "POST", "/v1/messages", map[string]any{
							"inbox_id": inbox, "to": []string{tc.to}, "subject": "Hello", "body": "Hi",
						}, tc.headers...)
					})
					mustStatus(t, r, tc.want)
					if p := r.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"inbox-per-minute"`) {
						t.Errorf("%s: RateLimit-Policy = %q, want the inbox's windows", tc.name, p)
					}
					var loads []string
					for _, q := range sql {
						if loadsInbox.MatchString(q) {
							loads = append(loads, q)
						}
					}
					t.Logf("%s: %d statements, %d loads of the inbox", tc.name, len(sql), len(loads))
					if len(loads) != 1 {
						t.Errorf("%s: the inbox was loaded %d times, want once:\n%s", tc.name, len(loads), strings.Join(loads, "\n"))
					}
				}
			})
		}
	})
}
