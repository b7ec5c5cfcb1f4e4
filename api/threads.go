package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

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

// getThread writes the whole conversation, as the contract has it, however
// long: the messages' bodies are read in batches of maxPageBytes and each
// batch is written and dropped before the next is read, so memory does not
// grow with the thread.
func (a *API) getThread(c echo.Context) error {
	t, err := a.thread(c, c.Param("id"))
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	msgs, _, err := a.Store.Messages(ctx, store.MessageFilter{ThreadID: t.ID, OmitBodies: true, SkipTotal: true})
	if err != nil {
		return err
	}
	slices.Reverse(msgs) // oldest first
	head, err := marshalNoEscape(struct {
		ID      string  `json:"id"`
		Subject string  `json:"subject"`
		Summary *string `json:"summary"`
	}{t.ID, t.Subject, t.Summary})
	if err != nil {
		return err
	}
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, strings.TrimSuffix(head, "}")+`,"messages":[`); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := 0; i < len(msgs); {
		batch := msgs[i : i+bodyBatch(msgs[i:], false)]
		if err := a.loadBodies(ctx, batch, false); err != nil {
			return err
		}
		for j := range batch {
			m := &batch[j]
			if i+j > 0 {
				if _, err := io.WriteString(w, ","); err != nil {
					return err
				}
			}
			ts := m.CreatedAt
			if m.SentAt != nil {
				ts = *m.SentAt
			}
			if err := enc.Encode(threadMessage{Role: "assistant", Author: m.FromAddress, Content: m.Text,
				Timestamp: timestamp(ts)}); err != nil {
				return err
			}
			m.Text = ""
		}
		i += len(batch)
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// thread loads a thread, mapping absence to the contract's 404 sentence.
func (a *API) thread(c echo.Context, id string) (*store.Thread, error) {
	t, err := a.Store.Thread(c.Request().Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Thread %s not found", id))
	}
	return t, err
}
