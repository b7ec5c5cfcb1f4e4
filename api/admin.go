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
		Failed:   a.adminLoginFailed,
		Secure:   a.viaTLS,
		Overview: a.adminOverview,
		Windows:  a.adminThrottle,
		Held:     a.adminHeld, Suppressions: a.adminSuppressions, Webhooks: a.adminWebhooks,
		Messages: a.adminMessages, Message: a.adminMessage,
		// Closures, not method values, which would be taken from a.Store
		// (and panic on a test's partial fake) when the dashboard is built.
		Revoke: func(ctx context.Context, id string, exp time.Time) error {
			return a.Store.CreateAdminLogout(ctx, id, exp)
		},
		Revoked: func(ctx context.Context, id string) (bool, error) { return a.Store.AdminLoggedOut(ctx, id) },
		Logger:  a.logger,
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

// adminOverview reads the overview: the throttle's windows
// (adminThrottle), the held mail, and the activity the charts draw.
func (a *API) adminOverview(ctx context.Context) (admin.Overview, error) {
	ov, err := a.adminThrottle(ctx)
	if err != nil {
		return ov, err
	}
	if ov.Activity, err = a.adminActivity(ctx, ov.At); err != nil {
		return ov, err
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

// adminThrottle reads the overview's throttle windows, what refreshes
// every 2 s: the global windows, and those of the busiest inboxes by
// sends used and in flight in the minute.
func (a *API) adminThrottle(ctx context.Context) (admin.Overview, error) {
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

// adminHeld reads a page of the held mail for the dashboard's Held page
// (store.HeldPage: one statement on its own index); none without a store
// of held mail.
func (a *API) adminHeld(ctx context.Context, limit, offset int) ([]admin.HeldMessage, error) {
	if a.Held == nil {
		return nil, nil
	}
	ms, err := a.Held.HeldPage(ctx, limit, offset)
	if err != nil {
		return nil, err
	}
	out := make([]admin.HeldMessage, len(ms))
	for i, m := range ms {
		out[i] = admin.HeldMessage{ID: m.ID, InboxID: m.InboxID, Status: m.Status, Subject: m.Subject,
			Recipients:  len(m.ToAddresses) + len(m.CcAddresses) + len(m.BccAddresses),
			ScheduledAt: deref(m.ScheduledAt), NextAttempt: deref(m.NextAttemptAt)}
	}
	return out, nil
}

// adminSuppressions reads a page of the suppression list.
func (a *API) adminSuppressions(ctx context.Context, reason string, limit, offset int) ([]admin.Suppression, int64, error) {
	list, total, err := a.Store.Suppressions(ctx, store.SuppressionFilter{Reason: reason, Limit: limit, Offset: offset})
	if err != nil {
		return nil, 0, err
	}
	out := make([]admin.Suppression, len(list))
	for i, s := range list {
		out[i] = admin.Suppression{Email: s.Email, Reason: s.Reason, Source: s.Source,
			MessageID: deref(s.MessageID), CreatedAt: s.CreatedAt}
	}
	return out, total, nil
}

// adminWebhooks reads the webhook endpoints, without their secrets, and
// each one's latest attempts (one statement per endpoint, stopped at
// admin.DeliveriesShown).
func (a *API) adminWebhooks(ctx context.Context) ([]admin.WebhookEndpoint, error) {
	es, err := a.Store.WebhookEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]admin.WebhookEndpoint, len(es))
	for i, e := range es {
		out[i] = admin.WebhookEndpoint{ID: e.ID, URL: e.URL, Events: e.Events, Enabled: e.Enabled,
			DisabledReason: deref(e.DisabledReason), FailingSince: deref(e.FailingSince), CreatedAt: e.CreatedAt}
		ds, err := a.Store.LatestWebhookDeliveries(ctx, e.ID, admin.DeliveriesShown)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			code := 0
			if d.StatusCode != nil {
				code = *d.StatusCode
			}
			out[i].Deliveries = append(out[i].Deliveries, admin.WebhookDelivery{EventType: d.EventType,
				Attempt: d.Attempt, StatusCode: code, LatencyMS: d.LatencyMS, Error: deref(d.Error),
				NextRetryAt: deref(d.NextRetryAt), At: d.CreatedAt})
		}
	}
	return out, nil
}
