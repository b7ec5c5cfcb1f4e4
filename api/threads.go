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
	out, err := a.Threads(c.Request().Context(), inboxID, limit, offset)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// Threads is a page of an inbox's threads, newest activity first: what
// GET /v1/threads, the list_threads tool and the inbox's recent resource
// answer.
func (a *API) Threads(ctx context.Context, inboxID string, limit, offset int) (List[ThreadSummary], error) {
	if _, err := a.inbox(ctx, inboxID); err != nil {
		return List[ThreadSummary]{}, err
	}
	threads, err := a.Store.Threads(ctx, inboxID, limit, offset)
	if err != nil {
		return List[ThreadSummary]{}, err
	}
	out := List[ThreadSummary]{Items: make([]ThreadSummary, len(threads)), Count: len(threads)}
	for i := range threads {
		out.Items[i] = toThreadSummary(&threads[i])
	}
	return out, nil
}

// getThread writes the whole conversation, as the contract has it, however
// long, one message at a time (see WalkBodies), so memory does not grow
// with the thread.
func (a *API) getThread(c echo.Context) error {
	ctx := c.Request().Context()
	t, err := a.Thread(ctx, c.Param("id"))
	if err != nil {
		return err
	}
	msgs, err := a.Conversation(ctx, t)
	if err != nil {
		return err
	}
	head, err := MarshalNoEscape(struct {
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
	err = a.WalkBodies(ctx, msgs, func(i int, m *store.Message) error {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		return enc.Encode(ToThreadMessage(m))
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "]}\n")
	return err
}

// Conversation lists t's messages, oldest first, without their bodies
// (WalkBodies reads them).
func (a *API) Conversation(ctx context.Context, t *store.Thread) ([]store.Message, error) {
	msgs, _, err := a.Store.Messages(ctx, store.MessageFilter{ThreadID: t.ID, OmitBodies: true, SkipTotal: true})
	slices.Reverse(msgs) // oldest first
	return msgs, err
}

// WalkBodies calls each for every message of msgs (read with OmitBodies),
// in order, with its text body: the bodies are read in batches of
// PageBytes, and each batch is dropped before the next is read, so
// memory does not grow with the list. An error from each stops the walk.
func (a *API) WalkBodies(ctx context.Context, msgs []store.Message, each func(i int, m *store.Message) error) error {
	for i := 0; i < len(msgs); {
		batch := msgs[i : i+bodyBatch(msgs[i:], false, a.PageBytes)]
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

// ToThreadMessage is one message of the conversation view.
func ToThreadMessage(m *store.Message) ThreadMessage {
	ts := m.CreatedAt
	if m.SentAt != nil {
		ts = *m.SentAt
	}
	return ThreadMessage{Role: "assistant", Author: m.FromAddress, Content: m.Text, Timestamp: Timestamp(ts)}
}

// Thread loads a thread, mapping absence to the contract's 404 sentence.
func (a *API) Thread(ctx context.Context, id string) (*store.Thread, error) {
	t, err := a.Store.Thread(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(fmt.Sprintf("Thread %s not found", id))
	}
	return t, err
}
