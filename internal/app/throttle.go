package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/nornweave/nornweave/core/config"
	"github.com/nornweave/nornweave/store"
)

// sharedThrottle is what THROTTLE_BACKEND builds beyond the in-memory
// limiter, and what must be closed with the app.
type sharedThrottle struct {
	lock *store.ServerLock // memory on PostgreSQL: this server is the only one
}

// newSharedThrottle prepares the configured throttle backend. With the
// in-memory throttle on PostgreSQL it takes the single-server lock, so that
// a second server on the same database is refused at start-up instead of
// sending with a full quota of its own.
func newSharedThrottle(ctx context.Context, cfg config.Config, st *store.Store, logger *slog.Logger) (*sharedThrottle, error) {
	s := &sharedThrottle{}
	if !cfg.SharedThrottle() {
		lock, err := st.SingleServer(ctx)
		if err != nil {
			if errors.Is(err, store.ErrAnotherServer) {
				logger.Error("refusing to start", slog.Any("error", err))
			}
			return nil, err
		}
		s.lock = lock
	}
	return s, nil
}

// Close releases what newSharedThrottle took; safe on nil and twice.
func (s *sharedThrottle) Close() error {
	if s == nil {
		return nil
	}
	return s.lock.Release()
}
