package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

func (a *API) listMessages(c echo.Context) error {
	f := store.MessageFilter{InboxID: c.QueryParam("inbox_id"), ThreadID: c.QueryParam("thread_id"),
		Query: c.QueryParam("q")}
	if f.InboxID == "" && f.ThreadID == "" {
		return fieldError("At least one of inbox_id or thread_id is required", "missing", "query", "inbox_id")
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
	msgs, total, err := a.Store.Messages(c.Request().Context(), f)
	if err != nil {
		return err
	}
	out := messageList{Items: make([]messageResponse, len(msgs)), Count: len(msgs), Total: total}
	for i := range msgs {
		out.Items[i] = toMessage(&msgs[i])
	}
	return c.JSON(http.StatusOK, out)
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

func (a *API) search(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("query", "inbox_id", "limit", "offset")
	query := obj.str("query", true, 1, 0)
	inboxID := obj.str("inbox_id", true, 0, 0)
	limit := obj.integer("limit", defaultLimit, 1, 100)
	offset := obj.integer("offset", 0, 0, 1<<31-1)
	if err := obj.err(); err != nil {
		return err
	}
	if _, err := a.inbox(c, inboxID); err != nil {
		return err
	}
	msgs, _, err := a.Store.Messages(c.Request().Context(), store.MessageFilter{InboxID: inboxID,
		Query: query, ContentOnly: true, Limit: limit, Offset: offset})
	if err != nil {
		return err
	}
	out := searchResponse{Items: make([]searchItem, len(msgs)), Count: len(msgs), Query: query}
	for i, m := range msgs {
		out.Items[i] = searchItem{ID: m.ID, ThreadID: m.ThreadID, InboxID: m.InboxID,
			Direction: m.Direction, ContentClean: m.Text, CreatedAt: timestamp(m.CreatedAt),
			Metadata: nonNilMap(m.Metadata)}
	}
	return c.JSON(http.StatusOK, out)
}
