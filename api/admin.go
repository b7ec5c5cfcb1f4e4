package api

import (
	"cmp"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// adminBusiest is how many inboxes the overview shows.
const adminBusiest = 10

// newAdmin builds the dashboard on the API's key, lockout, clock and
// trusted proxies.
func (a *API) newAdmin() *admin.Handler {
	return admin.New(admin.Options{
		APIKey: a.APIKey, ServerKey: a.AdminSessionKey, SessionTTL: a.AdminSessionTTL,
		Now: a.Clock.Now,
		Blocked: func(r *http.Request) (bool, time.Duration) {
			return a.authFailures.blocked(a.clientKey(r), a.Clock.Now())
		},
		Failed:   func(r *http.Request) { a.authFailures.fail(a.clientKey(r), a.Clock.Now()) },
		Secure:   a.viaTLS,
		Overview: a.adminOverview,
	})
}

// adminLoginFailed counts a wrong key on the login form as a failed API
// key, and logs it as requireAPIKey does.
func (a *API) adminLoginFailed(r *http.Request) {
	ip := a.clientAddr(r).String()
	a.logger.InfoContext(r.Context(), "admin login rejected", slog.String("client", ip))
	if a.authFailures.fail(a.clientKey(r), a.Clock.Now()) {
		a.logger.WarnContext(r.Context(), "too many failed API key attempts; client locked out",
			slog.String("client", ip), slog.Int("failures", a.AuthFailureLimit),
			slog.Int64("window_s", int64(authFailureWindow/time.Second)))
	}
}

// viaTLS reports whether r came over TLS: to this server, or to a trusted
// proxy that says so in X-Forwarded-Proto.
func (a *API) viaTLS(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return a.trusted(parseHop(r.RemoteAddr)) && strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// adminOverview reads the overview: the global windows, those of the
// busiest inboxes by sends used and in flight in the minute, and the held
// mail.
func (a *API) adminOverview(ctx context.Context) (admin.Overview, error) {
	ov := admin.Overview{Unit: a.Unit.String(), At: a.Clock.Now()}
	snap, err := a.Throttle.State(ctx, "", throttle.Override{})
	if err != nil {
		return ov, err
	}
	ov.Global = adminWindows(snap.Global, true)
	// The busiest by the throttle's log in the last minute (one grouped
	// statement), then, while fewer than ten, the first others by
	// address: the throttle is asked about ten inboxes at most, whatever
	// their number.
	ins, err := a.Store.BusiestInboxes(ctx, ov.At.Add(-time.Minute), adminBusiest)
	if err != nil {
		return ov, err
	}
	if len(ins) < adminBusiest {
		more, err := a.Store.Inboxes(ctx, 2*adminBusiest, 0)
		if err != nil {
			return ov, err
		}
		for _, in := range more {
			if len(ins) < adminBusiest && !slices.ContainsFunc(ins, func(x store.Inbox) bool { return x.ID == in.ID }) {
				ins = append(ins, in)
			}
		}
	}
	type busy struct {
		in   *store.Inbox
		load int
		st   throttle.ScopeState
	}
	all := make([]busy, 0, len(ins))
	for i := range ins {
		in := &ins[i]
		s, err := a.Throttle.State(ctx, skuld.InboxKey(in), skuld.InboxOverride(in))
		if err != nil {
			return ov, err
		}
		all = append(all, busy{in, s.Inbox.PerMinute.Used + s.Inbox.PerMinute.InFlight, s.Inbox})
	}
	slices.SortStableFunc(all, func(x, y busy) int { return cmp.Compare(y.load, x.load) })
	for _, b := range all {
		ov.Inboxes = append(ov.Inboxes, admin.InboxWindows{ID: b.in.ID, Address: b.in.EmailAddress,
			Name: b.in.Name, Windows: adminWindows(b.st, false)})
	}
	if a.Held != nil {
		st, err := a.Held.HeldStats(ctx)
		if err != nil {
			return ov, err
		}
		ov.Held = &admin.Held{Scheduled: st.Count[store.StatusScheduled], Queued: st.Count[store.StatusQueued],
			OldestQueued: st.OldestQueued}
	}
	return ov, nil
}

// adminWindows lists a scope's windows as /v1/rate-limit does: the second
// only for the global scope.
func adminWindows(p throttle.ScopeState, global bool) []admin.Window {
	w := func(name string, s throttle.WindowState) admin.Window {
		return admin.Window{Name: name, Limit: s.Limit, Used: s.Used, InFlight: s.InFlight, ResetSeconds: s.ResetSeconds}
	}
	var out []admin.Window
	if global {
		out = append(out, w("per_second", p.PerSecond))
	}
	return append(out, w("per_minute", p.PerMinute), w("per_hour", p.PerHour), w("per_day", p.PerDay))
}
