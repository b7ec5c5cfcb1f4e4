package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// listQuery are the query parameters of GET /v1/messages.
var listQuery = []string{"inbox_id", "thread_id", "q", "status", "limit", "offset"}

func (a *API) listMessages(c echo.Context) error {
	for name := range c.QueryParams() {
		if !slices.Contains(listQuery, name) {
			return fieldError("Extra inputs are not permitted", "extra_forbidden", "query", name)
		}
	}
	f := store.MessageFilter{InboxID: c.QueryParam("inbox_id"), ThreadID: c.QueryParam("thread_id"),
		Query: c.QueryParam("q"), Status: c.QueryParam("status")}
	if f.Status != "" && !slices.Contains(messageStatuses, f.Status) {
		return fieldError("Input should be one of "+strings.Join(messageStatuses, ", "), "literal_error", "query", "status")
	}
	var err error
	if f.Limit, f.Offset, err = pagination(c); err != nil {
		return err
	}
	msgs, total, err := a.Messages(c.Request().Context(), f, "query")
	if err != nil {
		return err
	}
	return streamItems(c, len(msgs), func(i int) any { return ToMessage(&msgs[i]) },
		fmt.Sprintf(`"count":%d,"total":%d`, len(msgs), total))
}

// Messages is the page of messages f selects (by inbox, thread and
// query), newest first, with their bodies, and how many match in all: what
// GET /v1/messages and the list_messages tool both answer. loc is where
// the filter came from ("query", "arguments"), for its validation errors.
func (a *API) Messages(ctx context.Context, f store.MessageFilter, loc string) ([]store.Message, int64, error) {
	f.OmitBodies = true
	if f.InboxID == "" && f.ThreadID == "" {
		return nil, 0, fieldError("At least one of inbox_id or thread_id is required", "missing", loc, "inbox_id")
	}
	if err := checkQuery(f.Query, loc, "q"); err != nil {
		return nil, 0, err
	}
	if f.InboxID != "" {
		if _, err := a.inbox(ctx, f.InboxID); err != nil {
			return nil, 0, err
		}
	}
	if f.ThreadID != "" {
		if _, err := a.Thread(ctx, f.ThreadID); err != nil {
			return nil, 0, err
		}
	}
	if f.Query != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, a.SearchTimeout)
		defer cancel()
	}
	msgs, total, err := a.Store.Messages(ctx, f)
	if err != nil {
		return nil, 0, a.searchError(ctx, err)
	}
	if msgs, err = a.withBodies(ctx, msgs, true); err != nil {
		return nil, 0, a.searchError(ctx, err)
	}
	return msgs, total, nil
}

func (a *API) getMessage(c echo.Context) error {
	d, err := a.Message(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// Message is a message with its attachments' descriptions (at most
// ATTACHMENT_MAX_COUNT; never their content) and its recipients' delivery
// states.
func (a *API) Message(ctx context.Context, id string) (MessageDetail, error) {
	m, err := a.message(ctx, id)
	if err != nil {
		return MessageDetail{}, err
	}
	atts, err := a.Store.Attachments(ctx, store.AttachmentFilter{MessageID: m.ID})
	if err != nil {
		return MessageDetail{}, err
	}
	evs, err := a.Store.MessageEvents(ctx, m.ID)
	if err != nil {
		return MessageDetail{}, err
	}
	return MessageDetail{MessageResponse: ToMessage(m), Attachments: toAttachments(atts), Recipients: recipients(m, evs)}, nil
}

// message loads a message, mapping absence to the contract's 404 sentence.
func (a *API) message(ctx context.Context, id string) (*store.Message, error) {
	m, err := a.Store.Message(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Message %s not found", id))
	}
	return m, err
}
