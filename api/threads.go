package api

import (
	"context"
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
	out, err := a.threadPage(c.Request().Context(), inboxID, limit, offset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// threadPage is a page of an inbox's threads, newest activity first: what
// GET /v1/threads, the list_threads tool and the inbox's recent resource
// answer.
func (a *API) threadPage(ctx context.Context, inboxID string, limit, offset int) (list[threadSummary], error) {
	if _, err := a.inbox(ctx, inboxID); err != nil {
		return list[threadSummary]{}, err
	}
	threads, err := a.Store.Threads(ctx, inboxID, limit, offset)
	if err != nil {
		return list[threadSummary]{}, err
	}
	out := list[threadSummary]{Items: make([]threadSummary, len(threads)), Count: len(threads)}
	for i := range threads {
		out.Items[i] = toThreadSummary(&threads[i])
	}
	return out, nil
}

// getThread writes the whole conversation, as the contract has it, however
// long, one message at a time (see walkBodies), so memory does not grow
// with the thread.
func (a *API) getThread(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := a.thread(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := a.conversation(ctx, t)
	if err != nil {
		return err
	}
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
	err = a.walkBodies(ctx, msgs, func(i int, m *store.Message) error {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		return enc.Encode(toThreadMessage(m))
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// conversation lists t's messages, oldest first, without their bodies
// (walkBodies reads them).
func (a *API) conversation(ctx context.Context, t *store.Thread) ([]store.Message, error) {
	msgs, _, err := a.Store.Messages(ctx, store.MessageFilter{ThreadID: t.ID, OmitBodies: true, SkipTotal: true})
	slices.Reverse(msgs) // oldest first
	return msgs, err
}

// walkBodies calls each for every message of msgs (read with OmitBodies),
// in order, with its text body: the bodies are read in batches of
// maxPageBytes, and each batch is dropped before the next is read, so
// memory does not grow with the list. An error from each stops the walk.
func (a *API) walkBodies(ctx context.Context, msgs []store.Message, each func(i int, m *store.Message) error) error {
	for i := 0; i < len(msgs); {
		batch := msgs[i : i+bodyBatch(msgs[i:], false)]
		if err := a.loadBodies(ctx, batch, false); err != nil {
			return err
		}
		for j := range batch {
			if err := each(i+j, &batch[j]); err != nil {
				return err
			}
			batch[j].Text = ""
		}
		i += len(batch)
	}
	return nil
}

// toThreadMessage is one message of the conversation view.
func toThreadMessage(m *store.Message) threadMessage {
	ts := m.CreatedAt
	if m.SentAt != nil {
		ts = *m.SentAt
	}
	return threadMessage{Role: "assistant", Author: m.FromAddress, Content: m.Text, Timestamp: timestamp(ts)}
}

// thread loads a thread, mapping absence to the contract's 404 sentence.
func (a *API) thread(ctx context.Context, id string) (*store.Thread, error) {
	t, err := a.Store.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Thread %s not found", id))
	}
	return t, err
}
