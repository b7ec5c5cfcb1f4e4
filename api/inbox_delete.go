package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// deleteInbox deletes an inbox once none of its sends is in flight, so a
// send and the deletion of its inbox end one of two ways: the send is
// recorded first (and the deletion then removes it with the inbox), or the
// deletion comes first and the send finds no inbox, 404, nothing sent
// (README, "Deleting an inbox while it sends").
func (a *API) deleteInbox(c echo.Context) error {
	ctx, id := c.Request().Context(), c.Param("id")
	// This server's sends are waited for by the gate, which wakes the
	// deletion the moment the last one is recorded and keeps new ones out;
	// other servers' by the store, which looks again until they are
	// settled (BENCHMARKS.md, section 17).
	reopen, err := a.Sender.CloseInbox(ctx, id)
	if err != nil {
		return err // the client went away while the sends finished
	}
	defer reopen()
	err = a.Store.DeleteInbox(ctx, id, a.Clock)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Inbox %s not found", id))
	}
	if err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
