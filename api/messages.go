package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

func (a *API) listMessages(c echo.Context) error {
	f := store.MessageFilter{InboxID: c.QueryParam("inbox_id"), ThreadID: c.QueryParam("thread_id"),
		Query: c.QueryParam("q"), OmitBodies: true}
	if f.InboxID == "" && f.ThreadID == "" {
		return fieldError("At least one of inbox_id or thread_id is required", "missing", "query", "inbox_id")
	}
	if err := checkQuery(f.Query, "query", "q"); err != nil {
		return err
	}
	var err error
	if f.Limit, f.Offset, err = pagination(c); err != nil {
		return err
	}
	if f.InboxID != "" {
		if _, err := a.inbox(c, f.InboxID); err != nil {
			return err
		}
	}
	if f.ThreadID != "" {
		if _, err := a.thread(c, f.ThreadID); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	if f.Query != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.SearchTimeout)
		defer cancel()
	}
	msgs, total, err := a.Store.Messages(ctx, f)
	if err != nil {
		return a.searchError(ctx, err)
	}
	if msgs, err = a.withBodies(ctx, msgs, true); err != nil {
		return a.searchError(ctx, err)
	}
	return streamItems(c, len(msgs), func(i int) any { return toMessage(&msgs[i]) },
		fmt.Sprintf(`"count":%d,"total":%d`, len(msgs), total))
}

func (a *API) getMessage(c echo.Context) error {
	id := c.Param("id")
	m, err := a.Store.Message(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("Message %s not found", id))
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toMessage(m))
}
