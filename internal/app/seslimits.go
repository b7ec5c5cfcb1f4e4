package app

import (
	"context"
	"errors"

	"github.com/nornweave/nornweave/providers"
	"github.com/nornweave/nornweave/skuld/seslimits"
)

// startSESLimits applies SES's quota to the throttle's global per-second
// and per-day windows now, and again every hour (SES_LIMITS_FROM_ACCOUNT).
// A first read that fails stops the start: the operator asked for SES's
// limits, and starting without them would send past them.
func (a *App) startSESLimits(ctx context.Context) error {
	if !a.cfg.SESLimitsFromAccount {
		return nil
	}
	ses, ok := a.provider.(*providers.SES)
	if !ok || a.throttle.limiter == nil {
		return errors.New("SES_LIMITS_FROM_ACCOUNT: needs EMAIL_PROVIDER=ses and THROTTLE_BACKEND=memory")
	}
	limiter := a.throttle.limiter
	r, err := seslimits.New(seslimits.Options{Reader: ses, Clock: a.clock, Logger: a.logger,
		Apply: func(perSecond, perDay int) {
			global, inbox := limiter.Limits()
			global.PerSecond, global.PerDay = perSecond, perDay
			limiter.SetLimits(global, inbox)
		}})
	if err != nil {
		return err
	}
	if err := r.Start(ctx); err != nil {
		return err
	}
	a.sesLimits = r
	return nil
}

// stopSESLimits stops the hourly read, if it runs.
func (a *App) stopSESLimits(ctx context.Context) error {
	if a.sesLimits == nil {
		return nil
	}
	return a.sesLimits.Stop(ctx)
}
