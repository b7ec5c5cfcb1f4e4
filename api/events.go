package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/store"
)

// EventResponse is one delivery event of a message.
type EventResponse struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Recipient  string    `json:"recipient"`
	OccurredAt Timestamp `json:"occurred_at"`
	Provider   string    `json:"provider"`
	BounceType *string   `json:"bounce_type"`
	SMTPStatus *string   `json:"smtp_status"`
	Diagnostic *string   `json:"diagnostic"`
}

func (a *API) listMessageEvents(c echo.Context) error {
	out, err := a.MessageEvents(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// MessageEvents is a message's delivery events, oldest first: 404 for a
// message that does not exist.
func (a *API) MessageEvents(ctx context.Context, id string) (List[EventResponse], error) {
	m, err := a.message(ctx, id)
	if err != nil {
		return List[EventResponse]{}, err
	}
	evs, err := a.Store.MessageEvents(ctx, m.ID)
	if err != nil {
		return List[EventResponse]{}, err
	}
	out := List[EventResponse]{Items: make([]EventResponse, len(evs)), Count: len(evs)}
	for i, e := range evs {
		out.Items[i] = EventResponse{ID: e.ID, Type: e.Type, Recipient: e.Recipient, OccurredAt: Timestamp(e.OccurredAt),
			Provider: e.Provider, BounceType: e.BounceType, SMTPStatus: e.SMTPStatus, Diagnostic: e.Diagnostic}
	}
	return out, nil
}

// RecipientState is a recipient of a message and its latest delivery
// state: the type of its latest event, or, before any, the message's
// status.
type RecipientState struct {
	Email     string    `json:"email"`
	State     string    `json:"state"`
	UpdatedAt Timestamp `json:"updated_at"`
}

// recipients is the state of each of m's recipients (to, cc, bcc, in that
// order, once each) by evs, m's events oldest first.
func recipients(m *store.Message, evs []store.DeliveryEvent) []RecipientState {
	at := m.CreatedAt
	if m.SentAt != nil {
		at = *m.SentAt
	}
	var out []RecipientState
	index := map[string]int{}
	for _, list := range [][]string{m.ToAddresses, m.CcAddresses, m.BccAddresses} {
		for _, r := range list {
			k := events.Canonical(r)
			if _, ok := index[k]; ok {
				continue
			}
			index[k] = len(out)
			out = append(out, RecipientState{Email: k, State: m.Status, UpdatedAt: Timestamp(at)})
		}
	}
	// Any event says more than the status; of a recipient's events the
	// latest, by the provider's clock (evs are oldest first), which may be
	// behind ours: its times are not compared with the send's.
	for _, e := range evs {
		if i, ok := index[e.Recipient]; ok {
			out[i].State, out[i].UpdatedAt = e.Type, Timestamp(e.OccurredAt)
		}
	}
	if out == nil {
		out = []RecipientState{}
	}
	return out
}
