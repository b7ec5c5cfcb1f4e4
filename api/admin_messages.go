package api

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/nornweave/nornweave/api/admin"
	"github.com/nornweave/nornweave/skuld"
	"github.com/nornweave/nornweave/skuld/events"
	"github.com/nornweave/nornweave/store"
)

// adminMessages reads a page of the dashboard's Messages page: one
// statement (store.Messages without its count and without the bodies),
// newest first along messages_inbox_status_created_idx with an inbox and
// a status (migration 0022), messages_inbox_created_idx with an inbox,
// messages_status_created_idx with a status, else messages_created_idx.
func (a *API) adminMessages(ctx context.Context, f admin.MessageFilter) ([]admin.MessageRow, error) {
	ms, _, err := a.Store.Messages(ctx, store.MessageFilter{InboxID: f.InboxID, Status: f.Status,
		Since: f.Since, Until: f.Until, Limit: f.Limit, Offset: f.Offset, OmitBodies: true, SkipTotal: true})
	if err != nil {
		return nil, err
	}
	out := make([]admin.MessageRow, len(ms))
	for i := range ms {
		out[i] = adminMessageRow(&ms[i])
	}
	return out, nil
}

func adminMessageRow(m *store.Message) admin.MessageRow {
	return admin.MessageRow{ID: m.ID, InboxID: m.InboxID, From: m.FromAddress, Subject: m.Subject,
		Status: m.Status, Error: deref(m.Error), To: m.ToAddresses, CreatedAt: m.CreatedAt}
}

// adminMessage reads a message's page: the message, its attachments'
// names and sizes (never their content) and its delivery events, each
// recipient's oldest first; admin.ErrNotFound for an unknown id.
func (a *API) adminMessage(ctx context.Context, id string) (admin.MessageDetail, error) {
	m, err := a.Store.Message(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return admin.MessageDetail{}, admin.ErrNotFound
	}
	if err != nil {
		return admin.MessageDetail{}, err
	}
	atts, err := a.Store.Attachments(ctx, store.AttachmentFilter{MessageID: m.ID})
	if err != nil {
		return admin.MessageDetail{}, err
	}
	evs, err := a.Store.MessageEvents(ctx, m.ID)
	if err != nil {
		return admin.MessageDetail{}, err
	}
	d := admin.MessageDetail{MessageRow: adminMessageRow(m), ThreadID: m.ThreadID,
		MessageIDHeader: m.MessageIDHeader, ProviderMessageID: deref(m.ProviderMessageID),
		Cc: m.CcAddresses, Bcc: m.BccAddresses, SentAt: deref(m.SentAt),
		ScheduledAt: deref(m.ScheduledAt), NextAttempt: deref(m.NextAttemptAt), Labels: m.Labels,
		Attempts: m.Attempts, Refusal: adminDecision(m.ThrottleRefusal), Admission: adminDecision(m.ThrottleAdmission)}
	if len(m.Metadata) > 0 {
		// Unescaped, so that the page shows the text as sent; the template
		// escapes it.
		var b strings.Builder
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(m.Metadata); err != nil {
			return admin.MessageDetail{}, err
		}
		d.Metadata = strings.TrimSuffix(b.String(), "\n")
	}
	for _, at := range atts {
		d.Attachments = append(d.Attachments, admin.Attachment{Filename: at.Filename,
			ContentType: at.ContentType, Size: int64(at.Size)})
	}
	index := map[string]int{}
	for _, r := range recipients(m, evs) {
		index[r.Email] = len(d.Recipients)
		d.Recipients = append(d.Recipients, admin.RecipientTimeline{Email: r.Email, State: r.State})
	}
	for _, e := range evs {
		i, ok := index[events.Canonical(e.Recipient)]
		if !ok { // an event for an address the message was not sent to
			i = len(d.Recipients)
			index[events.Canonical(e.Recipient)] = i
			d.Recipients = append(d.Recipients, admin.RecipientTimeline{Email: e.Recipient, State: e.Type})
		}
		d.Recipients[i].Events = append(d.Recipients[i].Events, admin.DeliveryEvent{Type: e.Type,
			Recipient: e.Recipient, Provider: e.Provider, BounceType: deref(e.BounceType),
			SMTPStatus: deref(e.SMTPStatus), Diagnostic: deref(e.Diagnostic), OccurredAt: e.OccurredAt})
	}
	return d, nil
}

// adminDecision is a message's recorded throttle decision (skuld.Decision's
// JSON) as the dashboard shows it; nil when none was recorded, or when
// what was recorded does not read as one.
func adminDecision(raw *string) *admin.Decision {
	if raw == nil {
		return nil
	}
	var d skuld.Decision
	if err := json.Unmarshal([]byte(*raw), &d); err != nil {
		return nil
	}
	out := &admin.Decision{At: d.At, Cost: d.Cost, Full: d.Full, RetryAfter: d.RetryAfter}
	for _, w := range d.Windows {
		out.Windows = append(out.Windows, admin.Window{Name: w.Window, Limit: w.Limit, Used: w.Used,
			InFlight: w.InFlight, ResetSeconds: w.ResetSeconds})
	}
	return out
}
