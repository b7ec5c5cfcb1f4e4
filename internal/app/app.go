// Package app is the composition root: it builds every part of the server
// from a Config by explicit constructors, and takes them down in order. The
// nornweave command and the end-to-end tests both start the server here, so
// the tests exercise exactly what ships.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/api/mcp"
	"github.com/nornweave/nornweave/core/clock"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/internal/metrics"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/providers/bounce"
	"github.com/nornweave/nornweave/providers/notify"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/activity"
	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/skuld/filter"
	"github.com/nornweave/nornweave/skuld/hold"
	"github.com/nornweave/nornweave/skuld/outbox"
	"github.com/nornweave/nornweave/skuld/render"
	"github.com/nornweave/nornweave/skuld/seslimits"
	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// DemoEmailDomain is used when the demo provider runs without EMAIL_DOMAIN,
// so a newcomer can create an inbox at once. ".test" is reserved (RFC 2606):
// such an address can never receive real mail.
const DemoEmailDomain = "demo.nornweave.test"

// App is a built server.
type App struct {
	cfg      config.Config
	logger   *slog.Logger
	store    *store.Store
	provider provider
	lock     *store.ServerLock // this server's place on the database
	backend  *sharedBackend    // what the server reads of its backend beside the throttle
	watcher  *watcher
	throttle *throttleParts
	unit     throttle.Unit // what a send costs (THROTTLE_UNIT)
	// sesLimits reads SES's quota into the throttle hourly
	// (SES_LIMITS_FROM_ACCOUNT; nil: not asked for).
	sesLimits *seslimits.Refresher
	budget    skuld.Budget
	sender    *skuld.Sender
	queue     *hold.Queue // dispatches held (scheduled and queued) messages
	clock     clock.Clock
	pageBytes int64 // WithPageBytes; 0: api.MaxPageBytes
	api       *api.Server
	version   string
	metrics   *metrics.Metrics
	// counts are the dashboard's counts of sends and refusals, added to
	// the database by the janitor.
	counts *activity.Counter
	// certFetch reads SNS's certificates (WithCertFetcher; nil: HTTPS).
	certFetch func(ctx context.Context, url string) ([]byte, error)
	// events records providers' events and bounces; bouncePoller reads
	// the bounce mailbox while the app serves (nil: none configured).
	events       *events.Recorder
	bouncePoller *bounce.Poller
	hooks        *api.Webhooks // the providers' webhooks configured
	// hooksOut delivers events to applications' endpoints (webhooks out);
	// hookClient and hookResolver replace its client's options and its
	// resolver in a test.
	hooksOut     *outbox.Webhooks
	hookClient   *notify.Options
	hookResolver notify.Resolver
	// retryBase scales River's backoff of held-mail jobs (WithRetryBase;
	// 0: River's own).
	retryBase time.Duration
}

// provider is what the app needs of a provider beyond sending.
type provider interface {
	skuld.Provider
	Close() error
}

// An Option changes how New builds the app; the nornweave command passes
// none.
type Option func(*App)

// WithClock makes c the time of the throttle, the send pipeline, its log's
// timers and the API, instead of the system clock: an end-to-end test
// advances it across a window instead of waiting (STYLE 25). It is held
// mail's time too (when a message is due, how long it waited); River's own
// timing of its jobs, and the HTTP server, keep real time.
func WithClock(c clock.Clock) Option { return func(a *App) { a.clock = c } }

// WithRetryBase scales River's backoff of a held-mail job whose dispatch
// failed, or that its rescuer took back, from a second to base
// (hold.ScaledRetry: attempt⁴ × base): an end-to-end test sees the job run
// again without waiting 1 s, then 16 s (STYLE 25). Zero keeps River's.
func WithRetryBase(base time.Duration) Option {
	return func(a *App) { a.retryBase = base }
}

// WithPageBytes caps the bodies of one list answer, REST and MCP, at n
// bytes instead of api.MaxPageBytes (8 MiB): an end-to-end test crosses
// the cap with kilobytes instead of megabytes, which cost seconds each
// under -race.
func WithPageBytes(n int64) Option { return func(a *App) { a.pageBytes = n } }

// New opens the database, applies migrations, restores the throttle from
// the sends of the last hour, and builds the provider, the send pipeline and
// the HTTP handler. cfg must have passed Validate. version is reported in
// the start-up line and the build_info metric.
func New(ctx context.Context, cfg config.Config, logger *slog.Logger, version string, opts ...Option) (*App, error) {
	a := &App{cfg: cfg, logger: logger, clock: clock.NewSystem(), version: version,
		budget: budgetOf(cfg)}
	for _, o := range opts {
		o(a)
	}
	switch {
	case cfg.EmailProvider == "demo" && cfg.EmailDomain == "":
		a.cfg.EmailDomain = DemoEmailDomain
		logger.Info("EMAIL_DOMAIN not set; the demo provider uses a reserved domain",
			slog.String("email_domain", DemoEmailDomain))
	case cfg.EmailDomain == "":
		logger.Warn("EMAIL_DOMAIN is not set: POST /v1/inboxes will answer 422 until it is; "+
			"set it to the domain your provider sends from", slog.String("provider", cfg.EmailProvider))
	}
	st, err := OpenStore(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	a.store = st
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	if a.provider, err = newProvider(ctx, cfg, logger); err != nil {
		st.Close()
		return nil, err
	}
	policy, err := filter.New(cfg.OutboundDomainAllowlist, cfg.OutboundDomainBlocklist)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	if a.unit, err = throttle.ParseUnit(cfg.ThrottleUnit); err != nil {
		a.closeAll()
		return nil, err
	}
	if a.backend, err = backendOf(ctx, cfg, st, logger); err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	j, err := joinDatabase(ctx, cfg, st, a.backend.identity, logger)
	if err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	a.lock = j.lock
	if a.throttle, err = newThrottle(ctx, cfg, st, a.clock, j.moved, logger); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := a.startSESLimits(ctx); err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	a.metrics = metrics.New(version, a.throttle.Throttle, a.throttle.backend, a.throttle.Unthrottled)
	a.metrics.WatchHeld(st, a.clock.Now)
	a.metrics.WatchReputation(st, a.clock.Now)
	// The queue before the restore, which writes the lane job of a held
	// message it gives back (store.ResolveInterrupted).
	qo := hold.Options{DB: st.SQL(), Driver: cfg.DBDriver, Store: st, Logger: logger,
		LongestLease: a.budget.Lease(largestMessage(cfg)), Alone: j.alone,
		Clock: a.clock, MaxAge: queueMaxAge(cfg), Observer: a.metrics, PollInterval: cfg.HeldPollInterval}
	hooksOut, ext, err := a.webhooksOut(cfg, st)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	a.hooksOut = hooksOut
	qo.Extensions = []hold.Extension{ext}
	if a.retryBase > 0 {
		qo.RetryPolicy = hold.ScaledRetry{Base: a.retryBase}
	}
	a.queue, err = hold.New(qo)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	// A shared backend's reservations are its record; send_log's restore
	// is the in-memory limiter's, and resolving "interrupted" sends at
	// start would fail those of the other servers still running.
	if a.throttle.shared != nil {
		st.ShareDatabase()
	} else if err := a.restoreThrottle(ctx); err != nil {
		a.closeAll()
		return nil, err
	}
	a.watcher = startWatcher(st, a.lock, a.throttle, a.backend.identity, j.identity, logger)
	a.events = events.New(st, a.metrics, a.clock.Now)
	verp, poller, err := a.bounces(ctx, a.events)
	if err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	a.bouncePoller = poller
	a.counts = activity.New(st, a.clock)
	so := skuld.Options{Store: st, Provider: a.provider, Throttle: a.throttle.Throttle, Unit: a.unit,
		Filter: policy, Logger: logger, Clock: a.clock, Observer: skuld.Observers(a.metrics, a.counts),
		RetryMax: cfg.SendRetryMax, Budget: a.budget,
		Hold: &skuld.Hold{Store: st, Jobs: a.queue}}
	if verp != nil {
		so.ReturnPath = returnPath(verp)
	}
	a.sender = skuld.NewSender(so)
	if err := a.queue.Start(ctx, a.sender); err != nil {
		a.closeAll()
		return nil, err
	}
	if err := a.hooksOut.Start(a.queue); err != nil {
		a.closeAll()
		return nil, err
	}
	a.metrics.WatchWebhooks(st, a.oldestUndelivered)
	a.hooks, err = a.webhooks()
	if err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	adminKey, err := st.ServerKeyFor(ctx, adminSessionKey)
	if err != nil {
		logger.Error("refusing to start", slog.Any("error", err))
		a.closeAll()
		return nil, err
	}
	a.api = api.New(api.Options{
		Webhooks: a.hooks, HooksOut: a.hooksOut, RespondAsync: cfg.SendRespondAsync,
		Store: st, Sender: a.sender, Throttle: a.throttle.Throttle, Unit: a.unit, Jobs: a.queue, ThrottleFailOpen: cfg.ThrottleFail == "open",
		Logger: logger,
		APIKey: cfg.APIKey, AuthFailureLimit: cfg.AuthFailureLimit,
		AdminSessionKey: adminKey, AdminSessionTTL: cfg.AdminSessionTTL, Held: st, Activity: a.counts, CORSOrigins: config.SplitList(cfg.CORSOrigins), EmailDomain: a.cfg.EmailDomain, PageBytes: a.pageBytes,
		AllowedHosts:           cfg.AllowedHostList(),
		TrustedProxies:         cfg.TrustedProxyPrefixes(),
		AttachmentMaxSize:      int64(cfg.AttachmentMaxSizeMB) << 20,
		AttachmentMaxTotalSize: int64(cfg.AttachmentMaxTotalSizeMB) << 20,
		AttachmentMaxCount:     cfg.AttachmentMaxCount,
		Clock:                  a.clock,
		Metrics:                a.metrics,
		MetricsAPIKey:          cfg.MetricsAPIKey,
		BodyMaxSize:            int64(cfg.BodyMaxSizeMB) << 20,
		HTMLMaxSize:            int64(cfg.HTMLMaxSizeMB) << 20,
		RequestsInFlight:       int64(cfg.RequestsInFlightMB) << 20,
		SearchTimeout:          time.Duration(cfg.SearchTimeoutSeconds) * time.Second,
		KeyLease:               a.keyLease(),
		ScheduleMaxAhead:       cmp.Or(cfg.ScheduleMaxAhead, 30*24*time.Hour),
		QueueOnThrottle:        cfg.SendOnThrottle == "queue",
		Version:                version,
		MCP:                    mcp.Handler,
	})
	return a, nil
}

// OpenStore opens the configured database without migrating it. On
// PostgreSQL its migrations include the shared throttle's tables.
func OpenStore(ctx context.Context, cfg config.Config, logger *slog.Logger) (*store.Store, error) {
	o := store.Options{Driver: cfg.DBDriver, Logger: logger, MaxOpenConns: cfg.DatabaseMaxConnections}
	if cfg.DBDriver == "postgres" {
		o.DSN = cfg.PostgresURL()
		o.Schemas = []store.Schema{pgthrottleSchema, hold.Schema(store.DriverPostgres)}
	} else {
		o.DSN = cfg.SQLitePath()
		o.Schemas = []store.Schema{hold.Schema(store.DriverSQLite)}
	}
	return store.Open(ctx, o)
}

// newProvider builds the configured provider from cfg; it makes no request
// to the provider, so a provider that is down does not stop the start.
func newProvider(ctx context.Context, cfg config.Config, logger *slog.Logger) (provider, error) {
	hc := providers.HTTPConfig{Timeout: cfg.ProviderTimeout, MaxConcurrency: cfg.ProviderMaxConcurrency,
		Logger: logger}
	switch cfg.EmailProvider {
	case "demo":
		return demoProvider{providers.NewDemo(logger)}, nil
	case "smtp":
		return providers.NewSMTP(providers.SMTPConfig{Host: cfg.SMTPHost, Port: cfg.SMTPPort,
			Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, UseTLS: cfg.SMTPUseTLS,
			Timeout: cfg.SMTPTimeout, MaxConns: cfg.SMTPMaxConnections, Logger: logger})
	case "mailgun":
		return providers.NewMailgun(providers.MailgunConfig{APIKey: cfg.MailgunAPIKey,
			Domain: cfg.MailgunDomain, APIBase: cfg.MailgunAPIBase, HTTPConfig: hc})
	case "sendgrid":
		return providers.NewSendGrid(providers.SendGridConfig{APIKey: cfg.SendgridAPIKey,
			APIBase: cfg.SendgridAPIBase, HTTPConfig: hc})
	case "resend":
		return providers.NewResend(providers.ResendConfig{APIKey: cfg.ResendAPIKey,
			APIBase: cfg.ResendAPIBase, HTTPConfig: hc})
	case "ses":
		return providers.NewSES(ctx, providers.SESConfig{AccessKeyID: cfg.AWSAccessKeyID,
			SecretAccessKey: cfg.AWSSecretAccessKey, Region: cfg.AWSRegion, Endpoint: cfg.SESEndpoint,
			HTTPConfig: hc})
	}
	return nil, fmt.Errorf("EMAIL_PROVIDER: unknown provider %q", cfg.EmailProvider)
}

// demoProvider gives the demo provider the Close the app calls on every provider.
type demoProvider struct{ *providers.Demo }

func (demoProvider) Close() error { return nil }

// restoreThrottle keeps the throttle's promise across a restart (see
// skuld.RestoreThrottle); the sends of the last hour count again, including
// those a crash interrupted, which may have gone out.
func (a *App) restoreThrottle(ctx context.Context) error {
	restored, interrupted, err := skuld.RestoreThrottle(ctx, a.store, a.throttle.limiter, a.clock, a.queue.Lane)
	if interrupted > 0 {
		a.logger.Warn("sends interrupted by the last shutdown resolved: given back if they were waiting, else counted and failed, delivery unknown", slog.Int64("sends", interrupted))
	}
	if restored > 0 {
		a.logger.Info("throttle restored from recent sends", slog.Int("sends", restored))
	}
	return err
}

// queueMaxAge is how long a held message may wait past its due time
// (QUEUE_MAX_AGE, 24 h by default).
func queueMaxAge(cfg config.Config) time.Duration { return cmp.Or(cfg.QueueMaxAge, 24*time.Hour) }

// Handler is the HTTP handler of the whole API.
func (a *App) Handler() http.Handler { return a.api }

// Serve serves HTTP on l until ctx ends, then shuts down gracefully: new
// requests get 503 with Retry-After while the sends in flight finish and are
// recorded; then the listener closes, requests in flight finish, and the
// provider and the database close.
func (a *App) Serve(ctx context.Context, l net.Listener) error {
	j := startJanitor(a.store, a.clock, a.logger, queueMaxAge(a.cfg), a.queue.Lane, a.counts)
	defer j.Stop()
	stopBounces := a.pollBounces()
	defer stopBounces()
	// WriteTimeout runs from the end of the request's headers, so it covers
	// reading the body (ReadTimeout), a send with every retry (its lease:
	// up to about 4 minutes for a 35 MB message), and writing the answer; a
	// client that stops reading cannot hold a response (and its memory)
	// forever. A send cut off by it is still recorded.
	srv := &http.Server{Handler: a.api, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 2 * time.Minute, WriteTimeout: 7 * time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(api.Listener(l)) }()
	a.logger.Info("nornweave started", a.startAttrs(l.Addr().String())...)

	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		a.logger.Info("shutting down: finishing in-flight requests")
	}
	start := time.Now()
	a.api.Drain()
	// Every send in flight ends by the end of its lease, retries included:
	// waiting that long (and a little, to record the outcome and answer)
	// abandons none of them.
	drainFor := a.sender.LongestLeaseLeft() + drainGrace
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), drainFor)
	defer cancel()
	sending := a.sender.InFlight()
	// The queue first: it stops taking jobs and finishes those running,
	// whose sends the sender's drain then finds recorded. Jobs not started
	// stay in the database for the next start.
	drainErr := errors.Join(a.hooksOut.Stop(shutdownCtx), a.queue.Stop(shutdownCtx), a.sender.Shutdown(shutdownCtx))
	a.logger.Info("sends drained; closing the listener")
	// The janitor's prune, and the bounce poller's records, must not meet
	// a closed database.
	j.Stop()
	stopBounces()
	err := errors.Join(drainErr, srv.Shutdown(shutdownCtx), a.Close(shutdownCtx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(serveErr, err)
	}
	abandoned := a.sender.InFlight()
	a.logger.Info("nornweave stopped", slog.Int("sends_in_flight_at_shutdown", sending),
		slog.Int("sends_drained", sending-abandoned), slog.Int("sends_abandoned", abandoned),
		slog.Int64("took_ms", time.Since(start).Milliseconds()), slog.Bool("clean", err == nil))
	return err
}

// drainGrace is what a drain allows past the longest lease in flight: the
// outcome's write, the answer, the listener's close.
const drainGrace = 30 * time.Second

// LongestDrain is the longest a graceful shutdown can take with cfg: the
// lease of the largest message allowed (every attempt and retry of it),
// and drainGrace. An orchestrator's grace period before SIGKILL (compose's
// stop_grace_period) must be longer.
func LongestDrain(cfg config.Config) time.Duration {
	return budgetOf(cfg).Lease(largestMessage(cfg)) + drainGrace
}

// budgetOf is the time cfg gives every send.
func budgetOf(cfg config.Config) skuld.Budget {
	return skuld.Budget{SendTimeout: cfg.SendTimeout, RetryDeadline: cfg.SendRetryDeadline}
}

// largestMessage is the most a message may weigh on the wire with cfg:
// every attachment at its limit in base64, the body rendered, the html.
func largestMessage(cfg config.Config) int {
	atts := cfg.AttachmentMaxTotalSizeMB << 20 * 4 / 3
	body := cfg.BodyMaxSizeMB << 20
	return atts + body + render.MaxSize(body) + cfg.HTMLMaxSizeMB<<20
}

// keyLease is, with a shared backend, how long another server may still be
// working on an Idempotency-Key it claimed: the longest a send can take,
// and a minute for the rest of the request. With the in-memory throttle
// there is one server: 0.
func (a *App) keyLease() time.Duration {
	if a.throttle.shared == nil {
		return 0
	}
	return a.budget.Lease(largestMessage(a.cfg)) + time.Minute
}

// Close waits for sends in flight, then closes the provider and the
// database. Safe to call twice.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.hooksOut.Stop(ctx), a.queue.Stop(ctx), a.sender.Shutdown(ctx), a.closeAll())
}

func (a *App) closeAll() error {
	a.watcher.Stop()
	// Before the provider it reads through is closed.
	sesErr := a.stopSESLimits(context.Background())
	var errs []error
	if a.provider != nil {
		errs = append(errs, a.provider.Close())
	}
	errs = append(errs, a.throttle.Close(), a.store.Close())
	if a.backend != nil {
		errs = append(errs, a.backend.close())
	}
	// Last: on SQLite, closing the lock's file must not come before the
	// database's own.
	return errors.Join(append(errs, sesErr, a.lock.Release())...)
}

// HeldRescueBound is the longest held mail whose job a server held when it
// died (kill -9, a lost machine) waits before another server, or the same
// one restarted, takes the job up again and sends it, behind what else it
// has to send (hold.RescueBound, from the longest lease with cfg).
func HeldRescueBound(cfg config.Config) time.Duration {
	return hold.RescueBound(budgetOf(cfg).Lease(largestMessage(cfg)))
}
