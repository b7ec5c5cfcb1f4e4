package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/store"
)

// maxQueryLen caps a search query, in characters. A query is a phrase a
// person or an agent looks for; 256 characters is several sentences, and
// the cap keeps one request from costing what a 1,000-character pattern
// costs a scan.
const maxQueryLen = 256

// checkQuery refuses a query longer than maxQueryLen or containing NUL
// (which PostgreSQL cannot store in text, so could never match), as a 422
// at loc.
func checkQuery(q string, loc ...any) error {
	if utf8.RuneCountInString(q) > maxQueryLen {
		return fieldError(fmt.Sprintf("String should have at most %d characters", maxQueryLen), "string_too_long", loc...)
	}
	if strings.ContainsRune(q, 0) {
		return fieldError("Query must not contain NUL", "value_error", loc...)
	}
	return nil
}

func (a *API) search(c echo.Context) error {
	obj, err := decodeBody(c.Request().Body)
	if err != nil {
		return err
	}
	obj.forbidExtra("query", "inbox_id", "limit", "offset")
	query := obj.str("query", true, 1, maxQueryLen)
	inboxID := obj.str("inbox_id", true, 0, 0)
	limit := obj.integer("limit", defaultLimit, 1, 100)
	offset := obj.integer("offset", 0, 0, 1<<31-1)
	if err := obj.err(); err != nil {
		return err
	}
	if err := checkQuery(query, "body", "query"); err != nil {
		return err
	}
	if _, err := a.inbox(c, inboxID); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), a.SearchTimeout)
	defer cancel()
	msgs, _, err := a.Store.Messages(ctx, store.MessageFilter{InboxID: inboxID,
		Query: query, ContentOnly: true, OmitBodies: true, SkipTotal: true, Limit: limit, Offset: offset})
	if err != nil {
		return a.searchError(ctx, err)
	}
	if msgs, err = a.withBodies(ctx, msgs, false); err != nil {
		return a.searchError(ctx, err)
	}
	q, err := marshalNoEscape(query)
	if err != nil {
		return err
	}
	return streamItems(c, len(msgs), func(i int) any {
		m := &msgs[i]
		return searchItem{ID: m.ID, ThreadID: m.ThreadID, InboxID: m.InboxID,
			Direction: m.Direction, ContentClean: m.Text, CreatedAt: timestamp(m.CreatedAt),
			Metadata: nonNilMap(m.Metadata)}
	}, fmt.Sprintf(`"count":%d,"query":%s`, len(msgs), q))
}

// searchError turns a search stopped by its context into an answer that
// says so: 503 search_timeout when SearchTimeout ran out, 499 when the
// client went away (nobody reads it; the access log does). Anything else
// is returned as it is.
func (a *API) searchError(ctx context.Context, err error) error {
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded):
		return newError(http.StatusServiceUnavailable, "search_timeout",
			fmt.Sprintf("Search took longer than SEARCH_TIMEOUT_SECONDS (%s); use a longer, more specific query",
				a.SearchTimeout))
	case errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled):
		return newError(statusClientClosed, "client_closed_request", "Client closed the request")
	}
	return err
}

// statusClientClosed is nginx's status for a request its client abandoned.
const statusClientClosed = 499
