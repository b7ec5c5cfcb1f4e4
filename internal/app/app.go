// Package app is the composition root: it builds every part of the server
// from a Config by explicit constructors, and takes them down in order. The
// nornweave command and the end-to-end tests both start the server here, so
// the tests exercise exactly what ships.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nornweave/nornweave/api"
	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld"
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
	limiter  *skuld.GlobalRateLimiter
	sender   *skuld.Sender
	handler  http.Handler
}

// provider is what the app needs of a provider beyond sending.
type provider interface {
	skuld.Provider
	Close() error
}

// New opens the database, applies migrations, restores the throttle from
// the sends of the last hour, and builds the provider, the send pipeline and
// the HTTP handler. cfg must have passed Validate.
func New(ctx context.Context, cfg config.Config, logger *slog.Logger) (*App, error) {
	a := &App{cfg: cfg, logger: logger}
	if cfg.EmailProvider == "demo" && cfg.EmailDomain == "" {
		a.cfg.EmailDomain = DemoEmailDomain
		logger.Info("EMAIL_DOMAIN not set; the demo provider uses a reserved domain",
			slog.String("email_domain", DemoEmailDomain))
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
	if a.provider, err = newProvider(cfg, logger); err != nil {
		st.Close()
		return nil, err
	}
	filter, err := skuld.NewDomainFilter(cfg.OutboundDomainAllowlist, cfg.OutboundDomainBlocklist)
	if err != nil {
		a.closeAll()
		return nil, err
	}
	a.limiter = skuld.NewGlobalRateLimiter(cfg.SendRateLimitPerMinute, cfg.SendRateLimitPerHour)
	if err := a.restoreThrottle(ctx); err != nil {
		a.closeAll()
		return nil, err
	}
	a.sender = skuld.NewSender(skuld.Options{Store: st, Provider: a.provider, Limiter: a.limiter,
		Filter: filter, Logger: logger})
	a.handler = api.New(api.Options{
		Store: st, Sender: a.sender, Limiter: a.limiter, Logger: logger,
		APIKey: cfg.APIKey, CORSOrigins: config.SplitList(cfg.CORSOrigins), EmailDomain: a.cfg.EmailDomain,
		AttachmentMaxSize:      int64(cfg.AttachmentMaxSizeMB) << 20,
		AttachmentMaxTotalSize: int64(cfg.AttachmentMaxTotalSizeMB) << 20,
		AttachmentMaxCount:     cfg.AttachmentMaxCount,
		BodyMaxSize:            int64(cfg.BodyMaxSizeMB) << 20,
		HTMLMaxSize:            int64(cfg.HTMLMaxSizeMB) << 20,
		RequestsInFlight:       int64(cfg.RequestsInFlightMB) << 20,
		SearchTimeout:          time.Duration(cfg.SearchTimeoutSeconds) * time.Second,
	})
	return a, nil
}

// OpenStore opens the configured database without migrating it.
func OpenStore(ctx context.Context, cfg config.Config, logger *slog.Logger) (*store.Store, error) {
	o := store.Options{Driver: cfg.DBDriver, Logger: logger}
	if cfg.DBDriver == "postgres" {
		o.DSN = cfg.PostgresURL()
	} else {
		o.DSN = cfg.SQLitePath()
	}
	return store.Open(ctx, o)
}

// newProvider builds the configured provider. The HTTP providers come in a
// later release; until then naming one is a start-up error, not a server
// that fails every send.
func newProvider(cfg config.Config, logger *slog.Logger) (provider, error) {
	switch cfg.EmailProvider {
	case "demo":
		return demoProvider{providers.NewDemo(logger)}, nil
	case "smtp":
		return providers.NewSMTP(providers.SMTPConfig{Host: cfg.SMTPHost, Port: cfg.SMTPPort,
			Username: cfg.SMTPUsername, Password: cfg.SMTPPassword, UseTLS: cfg.SMTPUseTLS, Logger: logger})
	}
	return nil, fmt.Errorf("EMAIL_PROVIDER: %s is not available in this version yet (use smtp or demo)", cfg.EmailProvider)
}

// demoProvider gives the demo provider the Close the app calls on every provider.
type demoProvider struct{ *providers.Demo }

func (demoProvider) Close() error { return nil }

// restoreThrottle keeps the throttle's promise across a restart: the sends
// of the last hour (and a minute, for the bucket edge) count again, including
// rows a crash left "sending", which may have gone out. Those rows are then
// marked failed, since nothing will ever record their outcome.
func (a *App) restoreThrottle(ctx context.Context) error {
	now := time.Now()
	if !a.limiter.Unlimited() {
		times, err := a.store.SendTimes(ctx, now.Add(-61*time.Minute))
		if err != nil {
			return err
		}
		for _, t := range times {
			// A clock that was ahead when the row was written must not
			// push the windows into the future.
			if t.After(now) {
				t = now
			}
			a.limiter.Restore(t)
		}
		if len(times) > 0 {
			a.logger.Info("throttle restored from recent sends", slog.Int("sends", len(times)))
		}
	}
	n, err := a.store.FailStaleSending(ctx, now)
	if n > 0 {
		a.logger.Warn("messages interrupted by the last shutdown marked failed", slog.Int64("messages", n))
	}
	return err
}

// Handler is the HTTP handler of the whole API.
func (a *App) Handler() http.Handler { return a.handler }

// Serve serves HTTP on l until ctx ends, then shuts down gracefully: stop
// accepting, let in-flight requests (and so in-flight sends) finish and be
// recorded, then close the provider and the database.
func (a *App) Serve(ctx context.Context, l net.Listener) error {
	// WriteTimeout runs from the end of the request's headers, so it covers
	// reading the body (ReadTimeout), a send, and writing the answer; a
	// client that stops reading cannot hold a response (and its memory)
	// forever.
	srv := &http.Server{Handler: a.handler, ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout: 2 * time.Minute, WriteTimeout: 3 * time.Minute, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(a.logger.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(l) }()
	a.logger.Info("listening", slog.String("addr", l.Addr().String()),
		slog.String("db_driver", a.cfg.DBDriver), slog.String("provider", a.cfg.EmailProvider))

	var serveErr error
	select {
	case serveErr = <-errc:
	case <-ctx.Done():
		a.logger.Info("shutting down: finishing in-flight requests")
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 90*time.Second)
	defer cancel()
	err := errors.Join(srv.Shutdown(shutdownCtx), a.Close(shutdownCtx))
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(serveErr, err)
	}
	return err
}

// Close waits for sends in flight, then closes the provider and the
// database. Safe to call twice.
func (a *App) Close(ctx context.Context) error {
	return errors.Join(a.sender.Shutdown(ctx), a.closeAll())
}

func (a *App) closeAll() error {
	var errs []error
	if a.provider != nil {
		errs = append(errs, a.provider.Close())
	}
	return errors.Join(append(errs, a.store.Close())...)
}
