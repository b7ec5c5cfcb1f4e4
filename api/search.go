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

// MaxQueryLen caps a search query, in characters. A query is a phrase a
// person or an agent looks for; 256 characters is several sentences, and
// the cap keeps one request from costing what a 1,000-character pattern
// costs a scan.
const MaxQueryLen = 256

// checkQuery refuses a query longer than MaxQueryLen or containing NUL
// (which PostgreSQL cannot store in text, so could never match), as a 422
// at loc.
func checkQuery(q string, loc ...any) error {
	if utf8.RuneCountInString(q) > MaxQueryLen {
		return fieldError(fmt.Sprintf("String should have at most %d characters", MaxQueryLen), "string_too_long", loc...)
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
	q := SearchQuery{Query: obj.str("query", true, 1, MaxQueryLen), InboxID: obj.str("inbox_id", true, 0, 0),
		Limit: obj.integer("limit", DefaultLimit, 1, MaxSearchLimit), Offset: obj.integer("offset", 0, 0, 1<<31-1)}
	if err := obj.err(); err != nil {
		return err
	}
	msgs, err := a.SearchMessages(c.Request().Context(), q, "body")
	if err != nil {
		return err
	}
	quoted, err := MarshalNoEscape(q.Query)
	if err != nil {
		return err
	}
	return streamItems(c, len(msgs), func(i int) any { return ToSearchItem(&msgs[i]) },
		fmt.Sprintf(`"count":%d,"query":%s`, len(msgs), quoted))
}

// MaxSearchLimit is the largest page of search results.
const MaxSearchLimit = 100

// SearchQuery is a search of one inbox's or one thread's messages.
type SearchQuery struct {
	Query         string
	InboxID       string // or ThreadID, or both
	ThreadID      string
	Limit, Offset int
}

// SearchMessages runs q: matches of the subject or the body, newest first,
// with their text bodies. POST /v1/search and the search_email tool both
// call it; loc is where q came from ("body", "arguments"), for its
// validation errors.
func (a *API) SearchMessages(ctx context.Context, q SearchQuery, loc string) ([]store.Message, error) {
	if err := checkQuery(q.Query, loc, "query"); err != nil {
		return nil, err
	}
	// Without a thread the inbox is what is searched: an empty id is an
	// inbox that is not found, as in any path.
	if q.InboxID != "" || q.ThreadID == "" {
		if _, err := a.inbox(ctx, q.InboxID); err != nil {
			return nil, err
		}
	}
	if q.ThreadID != "" {
		if _, err := a.Thread(ctx, q.ThreadID); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, a.SearchTimeout)
	defer cancel()
	msgs, _, err := a.Store.Messages(ctx, store.MessageFilter{InboxID: q.InboxID, ThreadID: q.ThreadID,
		Query: q.Query, ContentOnly: true, OmitBodies: true, SkipTotal: true, Limit: q.Limit, Offset: q.Offset})
	if err != nil {
		return nil, a.searchError(ctx, err)
	}
	if msgs, err = a.withBodies(ctx, msgs, false); err != nil {
		return nil, a.searchError(ctx, err)
	}
	return msgs, nil
}

func ToSearchItem(m *store.Message) SearchItem {
	return SearchItem{ID: m.ID, ThreadID: m.ThreadID, InboxID: m.InboxID, Direction: m.Direction,
		ContentClean: m.Text, CreatedAt: Timestamp(m.CreatedAt), Metadata: nonNilMap(m.Metadata)}
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
