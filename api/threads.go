package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

func (a *API) listThreads(c echo.Context) error {
	inboxID := c.QueryParam("inbox_id")
	if inboxID == "" {
		return fieldError("Field required", "missing", "query", "inbox_id")
	}
	limit, offset, err := pagination(c)
	if err != nil {
		return err
	}
	if _, err := a.inbox(c, inboxID); err != nil {
		return err
	}
	threads, err := a.Store.Threads(c.Request().Context(), inboxID, limit, offset)
	if err != nil {
		return err
	}
	out := list[threadSummary]{Items: make([]threadSummary, len(threads)), Count: len(threads)}
	for i := range threads {
		out.Items[i] = toThreadSummary(&threads[i])
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) getThread(c echo.Context) error {
	t, err := a.thread(c, c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := a.Store.ThreadMessages(c.Request().Context(), t.ID)
	if err != nil {
		return err
	}
	out := threadDetail{ID: t.ID, Subject: t.Subject, Summary: t.Summary,
		Messages: make([]threadMessage, len(msgs))}
	for i, m := range msgs {
		ts := m.CreatedAt
		if m.SentAt != nil {
			ts = *m.SentAt
		}
		out.Messages[i] = threadMessage{Role: "assistant", Author: m.FromAddress, Content: m.Text,
			Timestamp: timestamp(ts)}
	}
	return c.JSON(http.StatusOK, out)
}

// thread loads a thread, mapping absence to the contract's 404 sentence.
func (a *API) thread(c echo.Context, id string) (*store.Thread, error) {
	t, err := a.Store.Thread(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Thread %s not found", id))
	}
	return t, err
}
