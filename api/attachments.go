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

// Attachment listing bounds: the Python server's (GET /v1/attachments
// defaults to 100 where the other lists default to 50).
const (
	DefaultAttachmentLimit = 100
	MaxAttachmentLimit     = 500
)

// AttachmentResponse describes an attachment, never its content: the items
// of GET /v1/attachments and of a message's "attachments". It is the
// Python server's listing item with disposition and content_id added.
type AttachmentResponse struct {
	ID          string    `json:"id"`
	MessageID   string    `json:"message_id"`
	Filename    string    `json:"filename"`
	ContentType string    `json:"content_type"`
	Size        int       `json:"size"`
	Disposition string    `json:"disposition"`
	ContentID   *string   `json:"content_id"`
	CreatedAt   Timestamp `json:"created_at"`
}

// attachmentDetail is GET /v1/attachments/{id}, the Python server's
// AttachmentDetail: the description and where the content is.
type attachmentDetail struct {
	AttachmentResponse
	// StorageBackend is "database"; null for an attachment sent before
	// contents were kept, which has none.
	StorageBackend *string `json:"storage_backend"`
	// ContentHash is the content's SHA-256, hex.
	ContentHash *string `json:"content_hash"`
	// DownloadURL is the content's path here. It needs the API key like
	// every /v1 route: the Python server's signed URLs are not made.
	DownloadURL *string `json:"download_url"`
}

// AttachmentContent is GET /v1/attachments/{id}/content?format=base64, in
// the Python server's order.
type AttachmentContent struct {
	Content     string `json:"content"`
	ContentType string `json:"content_type"`
	Filename    string `json:"filename"`
}

func toAttachment(a *store.Attachment) AttachmentResponse {
	return AttachmentResponse{ID: a.ID, MessageID: a.MessageID, Filename: a.Filename, ContentType: a.ContentType,
		Size: a.Size, Disposition: a.Disposition, ContentID: a.ContentID, CreatedAt: Timestamp(a.CreatedAt)}
}

func toAttachments(atts []store.Attachment) []AttachmentResponse {
	out := make([]AttachmentResponse, len(atts))
	for i := range atts {
		out[i] = toAttachment(&atts[i])
	}
	return out
}

func toAttachmentDetail(a *store.Attachment) attachmentDetail {
	d := attachmentDetail{AttachmentResponse: toAttachment(a), ContentHash: a.ContentHash}
	if a.ContentHash != nil {
		backend, url := "database", "/v1/attachments/"+a.ID+"/content"
		d.StorageBackend, d.DownloadURL = &backend, &url
	}
	return d
}

// AttachmentQuery is what GET /v1/attachments lists: the attachments of
// exactly one message, thread or inbox, a page at a time (Limit 0: 100).
type AttachmentQuery struct {
	MessageID, ThreadID, InboxID string
	Limit, Offset                int
}

// attachmentFilters are the query's filters in the order they are named.
var attachmentFilters = []string{"message_id", "thread_id", "inbox_id"}

// Validate checks that exactly one filter is set, and the page's bounds.
func (q AttachmentQuery) Validate() error {
	if field, msg, typ := q.FilterProblem(); field != "" {
		return fieldError(msg, typ, "query", field)
	}
	switch {
	case q.Limit < 0:
		return fieldError("Input should be greater than or equal to 1", "greater_than_equal", "query", "limit")
	case q.Limit > MaxAttachmentLimit:
		return fieldError(fmt.Sprintf("Input should be less than or equal to %d", MaxAttachmentLimit),
			"less_than_equal", "query", "limit")
	case q.Offset < 0:
		return fieldError("Input should be greater than or equal to 0", "greater_than_equal", "query", "offset")
	}
	return nil
}

// FilterProblem names the filter at fault and why, unless exactly one
// filter is set (field "").
func (q AttachmentQuery) FilterProblem() (field, msg, typ string) {
	var given []string
	for i, v := range []string{q.MessageID, q.ThreadID, q.InboxID} {
		if v != "" {
			given = append(given, attachmentFilters[i])
		}
	}
	switch {
	case len(given) == 0:
		return "message_id", "Exactly one filter is required: message_id, thread_id or inbox_id", "missing"
	case len(given) > 1:
		return given[1], "Only one filter is allowed: message_id, thread_id or inbox_id (got " +
			strings.Join(given, " and ") + ")", "value_error"
	}
	return "", "", ""
}

// Attachments lists the attachments q selects. A message, thread or inbox
// that does not exist is a 404, as on the Python server; one without
// attachments is an empty list.
func (a *API) Attachments(ctx context.Context, q AttachmentQuery) (List[AttachmentResponse], error) {
	if err := q.Validate(); err != nil {
		return List[AttachmentResponse]{}, err
	}
	if q.Limit == 0 {
		q.Limit = DefaultAttachmentLimit
	}
	atts, err := a.Store.Attachments(ctx, store.AttachmentFilter{MessageID: q.MessageID, ThreadID: q.ThreadID,
		InboxID: q.InboxID, Limit: q.Limit, Offset: q.Offset})
	if err != nil {
		return List[AttachmentResponse]{}, err
	}
	// Only an empty page needs to know whether its parent exists.
	if len(atts) == 0 {
		if err := a.parentExists(ctx, q); err != nil {
			return List[AttachmentResponse]{}, err
		}
	}
	return List[AttachmentResponse]{Items: toAttachments(atts), Count: len(atts)}, nil
}

// parentExists is nil if the message, thread or inbox q names exists, else
// its 404.
func (a *API) parentExists(ctx context.Context, q AttachmentQuery) error {
	kind, id := "Inbox", q.InboxID
	lookup := func(ctx context.Context, id string) error { _, err := a.Store.Inbox(ctx, id); return err }
	switch {
	case q.MessageID != "":
		kind, id = "Message", q.MessageID
		lookup = func(ctx context.Context, id string) error { _, err := a.Store.Message(ctx, id); return err }
	case q.ThreadID != "":
		kind, id = "Thread", q.ThreadID
		lookup = func(ctx context.Context, id string) error { _, err := a.Store.Thread(ctx, id); return err }
	}
	err := store.ErrNotFound // an id that is not UTF-8 was never stored, and PostgreSQL refuses to look
	if utf8.ValidString(id) {
		err = lookup(ctx, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return notFound(fmt.Sprintf("%s %s not found", kind, id))
	}
	return err
}

// Attachment returns an attachment's description, or its 404.
func (a *API) Attachment(ctx context.Context, id string) (*store.Attachment, error) {
	att, err := a.Store.Attachment(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Attachment %s not found", id))
	}
	return att, err
}

func (a *API) listAttachments(c echo.Context) error {
	q := AttachmentQuery{MessageID: c.QueryParam("message_id"), ThreadID: c.QueryParam("thread_id"),
		InboxID: c.QueryParam("inbox_id")}
	var err error
	if q.Limit, err = queryInt(c.QueryParam("limit"), "limit", DefaultAttachmentLimit, 1, MaxAttachmentLimit); err != nil {
		return err
	}
	if q.Offset, err = queryInt(c.QueryParam("offset"), "offset", 0, 0, 1<<31-1); err != nil {
		return err
	}
	out, err := a.Attachments(c.Request().Context(), q)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

func (a *API) getAttachment(c echo.Context) error {
	att, err := a.Attachment(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toAttachmentDetail(att))
}
