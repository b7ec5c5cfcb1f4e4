package app

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nornweave/nornweave/skuld/throttle"
	"github.com/nornweave/nornweave/store"
)

// identityEvery is how often a server reads the throttle identity for a
// change of limits made with `nornweave limits set`.
const identityEvery = 2 * time.Second

// limitsSetter is the running throttle whose limits a change reaches.
type limitsSetter interface {
	SetLimits(global, inbox throttle.Limits)
}

// watcher picks up a deliberate change of limits: every identityEvery it
// reads the throttle identity and, when its version has moved, applies the
// limits recorded and logs the change. On the same tick it keeps the
// server lock held (store.ServerLock.Hold), which a lost database session
// lets go, and writes the backend's identity back into a backend that lost
// it (a FLUSHDB), so that servers starting later can join. It runs from
// startWatcher until Stop.
type watcher struct {
	st      *store.Store
	lock    *store.ServerLock
	target  limitsSetter
	backend backendIdentity // nil with the in-memory throttle
	logger  *slog.Logger
	version int64
	limits  store.ThrottleIdentity

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

func startWatcher(st *store.Store, lock *store.ServerLock, target limitsSetter, backend backendIdentity,
	mine store.ThrottleIdentity, logger *slog.Logger) *watcher {
	w := &watcher{st: st, lock: lock, target: target, backend: backend, logger: logger, limits: mine,
		stop: make(chan struct{}), done: make(chan struct{})}
	if id, err := st.ThrottleIdentity(context.Background()); err == nil {
		w.version = id.Version
	}
	go w.run()
	return w
}

func (w *watcher) run() {
	defer close(w.done)
	t := time.NewTicker(identityEvery)
	defer t.Stop()
	for {
		select {
		case <-w.stop:
			return
		case <-t.C:
			w.check()
		}
	}
}

func (w *watcher) check() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	w.hold(ctx)
	w.keepBackendIdentity(ctx)
	id, err := w.st.ThrottleIdentity(ctx)
	if err != nil || id.Version == w.version {
		return // a database that does not answer: the next tick will do
	}
	w.version = id.Version
	diffs := differences(*id, w.limits)
	if len(diffs) == 0 {
		return
	}
	w.target.SetLimits(throttle.Limits{PerSecond: id.GlobalPerSecond, PerMinute: id.GlobalPerMinute,
		PerHour: id.GlobalPerHour, PerDay: id.GlobalPerDay},
		throttle.Limits{PerMinute: id.InboxPerMinute, PerHour: id.InboxPerHour, PerDay: id.InboxPerDay})
	w.limits = *id
	for _, d := range diffs {
		w.logger.Warn("throttle limits changed", slog.String("variable", d.variable), slog.String("was", d.theirs),
			slog.String("now", d.mine), slog.String("changed_by", id.ChangedBy),
			slog.Time("changed_at", id.ChangedAt))
	}
}

// keepBackendIdentity writes the recorded identity back into the backend
// if it has none (SET NX; ON CONFLICT DO NOTHING): the state lost with it
// is the throttle's to notice and rebuild.
func (w *watcher) keepBackendIdentity(ctx context.Context) {
	if w.backend == nil || w.limits.BackendIdentity == "" {
		return
	}
	if _, err := w.backend.Keep(ctx, w.limits.BackendIdentity); err != nil {
		w.logger.Debug("throttle backend identity not written back", slog.Any("error", err))
	}
}

// hold keeps the server lock, and says so when it was lost: taken again,
// or taken by another server meanwhile (which this one cannot undo; an
// operator must stop one of the two).
func (w *watcher) hold(ctx context.Context) {
	retaken, err := w.lock.Hold(ctx)
	switch {
	case errors.Is(err, store.ErrAnotherServer):
		w.logger.Error("this server's lock on the database was lost (its session ended) and another server " +
			"has taken the database since: with a throttle of their own each, together they can send more " +
			"than the limit; stop one of them")
	case retaken:
		w.logger.Warn("this server's lock on the database was lost (its session ended) and is held again")
	}
}

// Stop ends the watcher; safe to call twice.
func (w *watcher) Stop() {
	if w == nil {
		return
	}
	w.once.Do(func() { close(w.stop) })
	<-w.done
}
