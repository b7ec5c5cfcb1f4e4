package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/nornweave/nornweave/providers/bounce"
	"github.com/nornweave/nornweave/providers/webhook"
	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/store"
)

// verpKey names the server key of the VERP return paths (store.ServerKeyFor).
const verpKey = "verp"

// adminSessionKey names the server key that signs the dashboard's session
// cookies: shared, so that a login holds on every server of the database.
const adminSessionKey = "admin-session"

// bounces builds the VERP of BOUNCE_ADDRESS, under the key every server on
// the database shares, and the poller of BOUNCE_IMAP_URL; both nil when
// not configured.
func (a *App) bounces(ctx context.Context, rec *events.Recorder) (*bounce.VERP, *bounce.Poller, error) {
	if a.cfg.BounceAddress == "" {
		return nil, nil, nil
	}
	key, err := a.store.ServerKeyFor(ctx, verpKey)
	if err != nil {
		return nil, nil, err
	}
	verp, err := bounce.NewVERP(a.cfg.BounceAddress, key)
	if err != nil {
		return nil, nil, fmt.Errorf("BOUNCE_ADDRESS: %w", err)
	}
	if a.cfg.BounceIMAPURL == "" {
		return verp, nil, nil
	}
	imap, err := bounce.ParseIMAPURL(a.cfg.BounceIMAPURL)
	if err != nil {
		return nil, nil, fmt.Errorf("BOUNCE_IMAP_URL: %w", err)
	}
	p := bounce.NewPoller(bounce.PollerOptions{IMAP: imap, VERP: verp, Logger: a.logger, Now: a.clock.Now,
		Handle: func(ctx context.Context, bs []bounce.Bounce) error { return a.recordBounces(ctx, rec, bs) }})
	return verp, p, nil
}

// returnPath is skuld.Options.ReturnPath for v: "" (the From) if v cannot
// make one, which a message id of ours never is.
func returnPath(v *bounce.VERP) func(id, recipient string) string {
	return func(id, recipient string) string {
		rp, err := v.ReturnPath(id, recipient)
		if err != nil {
			return ""
		}
		return rp
	}
}

// recordBounces records the events of one bounce notification. A bounce
// for a message that no longer exists is dropped (its inbox was deleted);
// one whose token was for any recipient of its message counts only for a
// recipient of that message.
func (a *App) recordBounces(ctx context.Context, rec *events.Recorder, bs []bounce.Bounce) error {
	ours := map[string][]webhook.Event{}
	recipients := map[string][]string{}
	for _, b := range bs {
		rcpts, ok := recipients[b.MessageID]
		if !ok {
			m, err := a.store.Message(ctx, b.MessageID)
			if errors.Is(err, store.ErrNotFound) {
				recipients[b.MessageID] = nil
				continue
			}
			if err != nil {
				return err
			}
			for _, list := range [][]string{m.ToAddresses, m.CcAddresses, m.BccAddresses} {
				for _, r := range list {
					rcpts = append(rcpts, events.Canonical(r))
				}
			}
			recipients[b.MessageID] = rcpts
		}
		if rcpts == nil || b.AnyRecipient && !slices.Contains(rcpts, b.Event.Recipient) {
			a.logger.InfoContext(ctx, "bounce names no recipient of a message of ours; ignored", slog.String("message_id", b.MessageID))
			continue
		}
		ours[b.MessageID] = append(ours[b.MessageID], b.Event)
	}
	_, err := rec.RecordOurs(ctx, "smtp", ours)
	return err
}

// pollBounces reads the bounce mailbox every BOUNCE_POLL_INTERVAL until
// the returned stop is called (once or more; it waits for a pass under
// way).
func (a *App) pollBounces() (stop func()) {
	if a.bouncePoller == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.bouncePoller.Run(ctx, a.cfg.BouncePollInterval)
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }
}
