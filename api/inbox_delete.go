package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// The wait between two tries of a deletion held by another server's send,
// doubling from the first to the last: that send's end cannot be
// signalled here, only seen in the database.
const (
	deleteRetryFirst = 10 * time.Millisecond
	deleteRetryMax   = 500 * time.Millisecond
)

// deleteInbox deletes an inbox once none of its sends is in flight, so a
// send and the deletion of its inbox end one of two ways: the send is
// recorded first (and the deletion then removes it with the inbox), or the
// deletion comes first and the send finds no inbox, 404, nothing sent
// (README, "Deleting an inbox while it sends").
func (a *API) deleteInbox(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	// This server's sends are waited for by the gate, which wakes the
	// deletion the moment the last one is recorded and keeps new ones out.
	reopen, err := a.Sender.CloseInbox(ctx, id)
	if err != nil {
		return err // the client went away while the sends finished
	}
	defer reopen()
	err = a.deleteSettled(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Inbox %s not found", id))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// deleteSettled deletes inbox id, trying again while another server's
// send of it is in flight (store.InboxBusyError). The wait is bounded by
// construction: a send holds the deletion until its deadline at the
// latest, the end of its lease, after which the store no longer counts it.
// It fails with ctx's error if the client goes away meanwhile.
func (a *API) deleteSettled(ctx context.Context, id string) error {
	wait := deleteRetryFirst
	for logged := false; ; logged = true {
		now := a.Clock.Now()
		err := a.Store.DeleteInbox(ctx, id, now)
		var busy *store.InboxBusyError
		if !errors.As(err, &busy) {
			return err
		}
		if !logged {
			a.Logger.InfoContext(ctx, "inbox deletion waits for its sends in flight",
				slog.String("inbox_id", id), slog.Time("until", busy.Until))
		}
		if err := a.sleep(ctx, min(wait, max(busy.Until.Sub(now), 0))); err != nil {
			return err
		}
		wait = min(2*wait, deleteRetryMax)
	}
}

// sleep waits d on the API's clock, or until ctx ends.
func (a *API) sleep(ctx context.Context, d time.Duration) error {
	done := make(chan struct{})
	t := a.Clock.AfterFunc(d, func() { close(done) })
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
