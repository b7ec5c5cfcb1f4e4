package tests

import (
	"cmp"
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/internal/app"
	"github.com/nornweave/nornweave/internal/testkit/apptest"
	"github.com/nornweave/nornweave/internal/testkit/clocktest"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// openMigrated opens a fresh, migrated store of driver.
func openMigrated(t *testing.T, driver string) *store.Store {
	t.Helper()
	cfg := apptest.Config(t, driver)
	st, err := app.OpenStore(context.Background(), cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestThrottleModelWithCrashes drives the throttle's protocol as the send
// pipeline does — reserve, record the send with its slot, the provider
// answering after a latency up to the lease, commit or release, record the
// outcome — on the real store, with crashes (everything in memory lost,
// sends in flight abandoned) and restarts (RestoreThrottle) between steps.
//
// Some provider attempts run up to the lease and some try to outlive it:
// a relay that would take the message, or answer, after the attempt's
// deadline. The connection guard (providers' SMTP tests prove it) cuts
// such a connection at the deadline: a message not taken by then is never
// taken (the send fails for certain and its slot is given back); one
// taken but not answered is an unknown outcome, committed at the deadline.
// Every send that went out, or may have, is a delivery at the moment the
// relay received it; no 60 s or 3600 s interval may hold more than the
// limit. Each send costs a random weight of 1 to 3 units (its recipients,
// THROTTLE_UNIT=recipient), which the limits count and a restart restores.
func TestThrottleModelWithCrashes(t *testing.T) {
	t.Parallel()
	const perMinute, perHour, lease = 6, 40, 40 * time.Second
	forEachDriver(t, func(t *testing.T, driver string) {
		ctx := context.Background()
		st := openMigrated(t, driver)
		in := &store.Inbox{EmailAddress: "model@acme.test", Name: "Model"}
		if err := st.CreateInbox(ctx, in); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(6, 11))
		clock := clocktest.New(time.Now().UTC().Truncate(time.Second))

		type delivery struct {
			at time.Duration // on the monotonic axis
			n  int           // units
		}
		type pending struct {
			res       throttle.Reservation
			id        string
			n         int           // units
			done      time.Duration // when the provider answers
			delivered time.Duration // when it took the message; -1 if never
			outcome   string        // sent, failed, unknown
		}
		var (
			lim        *throttle.GlobalRateLimiter
			inFlight   []pending
			deliveries []delivery
			crashes    int
		)
		restart := func() {
			lim = throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: perMinute, PerHour: perHour}, throttle.Limits{})
			if _, _, err := skuld.RestoreThrottle(ctx, st, lim, clock, nil); err != nil {
				t.Fatal(err)
			}
		}
		restart()
		settle := func(p pending) {
			now, wall := clock.Mono(), clock.Now()
			out := store.Outcome{Status: store.StatusFailed}
			switch p.outcome {
			case "sent", "unknown":
				p.res.Commit(now)
				out.CountedAt = &wall
				if p.outcome == "sent" {
					out.Status, out.SentAt = store.StatusSent, &wall
				}
				deliveries = append(deliveries, delivery{p.delivered, p.n})
			default:
				p.res.Release()
			}
			if err := st.UpdateMessageOutcome(ctx, p.id, out); err != nil {
				t.Fatal(err)
			}
		}

		for range 5000 {
			clock.Advance(time.Duration(rng.Int64N(int64(3 * time.Second))))
			now := clock.Mono()
			inFlight = slices.DeleteFunc(inFlight, func(p pending) bool {
				if p.done <= now {
					settle(p)
					return true
				}
				return false
			})
			switch r := rng.IntN(100); {
			case r < 2: // kill -9: what the provider had taken by now went out
				for _, p := range inFlight {
					if p.outcome != "failed" && p.delivered >= 0 && p.delivered <= now {
						deliveries = append(deliveries, delivery{p.delivered, p.n})
					}
				}
				inFlight = nil
				crashes++
				clock.Advance(time.Duration(rng.Int64N(int64(90 * time.Second))))
				restart()
			case r < 60:
				n := 1 + rng.IntN(3)
				res, err := lim.ReserveN(now, lease, "", throttle.Override{}, n)
				if err != nil {
					continue
				}
				wall := clock.Now()
				m := &store.Message{InboxID: in.ID, Status: store.StatusSending, MessageIDHeader: "<m@acme.test>",
					Subject: "s", FromAddress: in.EmailAddress, CreatedAt: wall}
				th := &store.Thread{InboxID: in.ID, Subject: "s", ParticipantHash: "h"}
				if err := st.CreateMessage(ctx, m, nil, th, &store.SendSlot{Scope: in.EmailAddress, ReservedAt: wall, Deadline: wall.Add(lease), Cost: n}); err != nil {
					t.Fatal(err)
				}
				// The relay would take the message at take and answer at
				// answer; a third of the attempts try to run past the
				// lease, up to half as long again.
				deadline := now + lease
				answer := now + time.Duration(rng.Int64N(int64(lease)*3/2))
				take := now + time.Duration(rng.Int64N(int64(answer-now)+1))
				p := pending{res: res, id: m.ID, n: n, done: answer, outcome: "sent", delivered: take}
				switch rng.IntN(10) {
				case 0:
					p.outcome = "failed"
				case 1:
					p.outcome = "unknown"
				}
				switch {
				case take > deadline: // cut before the relay took it: never sent
					p.done, p.outcome, p.delivered = deadline, "failed", -1
				case answer > deadline: // taken, cut before the answer
					p.done, p.outcome = deadline, "unknown"
				}
				inFlight = append(inFlight, p)
			}
		}
		slices.SortFunc(deliveries, func(a, b delivery) int { return cmp.Compare(a.at, b.at) })
		weights := map[int]int{}
		for _, d := range deliveries {
			weights[d.n]++
		}
		for _, w := range []struct {
			span  time.Duration
			limit int
		}{{time.Minute, perMinute}, {time.Hour, perHour}} {
			for i, d := range deliveries {
				units := 0
				for _, e := range deliveries[i:] {
					if e.at > d.at+w.span {
						break
					}
					units += e.n
				}
				if units > w.limit {
					t.Fatalf("%v from %v: %d units delivered, want at most %d", w.span, d.at, units, w.limit)
				}
			}
		}
		if len(weights) != 3 {
			t.Errorf("deliveries by weight %v: want every weight of 1 to 3 delivered", weights)
		}
		if crashes < 10 || len(deliveries) < 2*perHour {
			t.Errorf("only %d crashes and %d deliveries: the schedule should exercise both", crashes, len(deliveries))
		}
	})
}

// panicky is a provider with a bug.
type panicky struct{}

func (panicky) Name() string { return "panicky" }
func (panicky) Send(context.Context, providers.Message) (string, error) {
	panic("nil map write in provider")
}

// TestProviderPanicIsSettled is hole 7: a provider that panicked leaked its
// reservation (in flight until restart) and left the row sending. Now the
// send is an unknown outcome: recorded failed, counted, nothing in flight.
func TestProviderPanicIsSettled(t *testing.T) {
	t.Parallel()
	forEachDriver(t, func(t *testing.T, driver string) {
		st := openMigrated(t, driver)
		lim := throttle.NewMemory(throttle.NewGlobalRateLimiter(throttle.Limits{PerMinute: 1}, throttle.Limits{}), clock.NewSystem())
		sender := skuld.NewSender(skuld.Options{Store: st, Provider: panicky{}, Throttle: lim})
		srv := httptest.NewServer(api.New(api.Options{Store: st, Sender: sender, Throttle: lim,
			EmailDomain: "acme.test", AttachmentMaxSize: 1 << 20, AttachmentMaxTotalSize: 1 << 20, AttachmentMaxCount: 1}))
		t.Cleanup(srv.Close)
		s := &server{Server: &apptest.Server{URL: srv.URL}}
		inbox := s.createInbox(t, "support")

		r := s.send(t, inbox, "bob@customer.test")
		mustStatus(t, r, http.StatusCreated)
		m := r.JSON(t)
		if m["status"] != "failed" {
			t.Errorf("status = %v, want failed", m["status"])
		}
		row := s.do(t, "GET", "/v1/messages/"+m["id"].(string), nil).JSON(t)
		if row["status"] != "failed" {
			t.Errorf("stored status = %v, want failed (not left sending)", row["status"])
		}
		if w := s.rateLimitWindow(t, "per_minute"); w["used"] != float64(1) || w["in_flight"] != float64(0) {
			t.Errorf("per_minute = %v, want used 1, in_flight 0", w)
		}
		if times, err := st.CountedSends(context.Background(), time.Now().Add(-time.Hour)); err != nil || len(times) != 1 {
			t.Errorf("counted sends = %v, %v; want the panicked send counted for a restart", times, err)
		}
	})
}
