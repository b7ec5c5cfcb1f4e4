package webhook

import (
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
)

// The parsers read a verified body into events. A provider's event that
// says nothing about delivery (sent, processed, accepted, scheduled,
// unsubscribed) gives none; a body that is not the provider's shape is an
// error (400: it was signed, so the provider is told).

// ParseResend reads a Resend webhook (one event, to one or more
// recipients), named by its svix-id.
func ParseResend(svixID string, body []byte) ([]Event, error) {
	var p struct {
		Type      string `json:"type"`
		CreatedAt string `json:"created_at"`
		Data      struct {
			EmailID   string   `json:"email_id"`
			To        []string `json:"to"`
			CreatedAt string   `json:"created_at"`
			Bounce    struct {
				Type    string `json:"type"`
				SubType string `json:"subType"`
				Message string `json:"message"`
			} `json:"bounce"`
			Failed struct {
				Reason string `json:"reason"`
			} `json:"failed"`
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
			Suppression struct {
				Reason string `json:"reason"`
			} `json:"suppression"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("resend event: %w", err)
	}
	e := Event{ProviderMessageID: p.Data.EmailID}
	switch p.Type {
	case "email.delivered":
		e.Type = Delivered
	case "email.bounced":
		e.Type, e.BounceType, e.Diagnostic = Bounced, Soft, diagnostic(p.Data.Bounce.Message)
		if p.Data.Bounce.Type == "Permanent" {
			e.BounceType = Hard
		}
	case "email.complained":
		e.Type = Complained
	case "email.delivery_delayed":
		e.Type = Delayed
	case "email.failed":
		e.Type, e.Diagnostic = Failed, diagnostic(cmp.Or(p.Data.Failed.Reason, p.Data.Error.Message))
	case "email.opened":
		e.Type = Opened
	case "email.clicked":
		e.Type = Clicked
	case "email.suppressed":
		e.Type, e.Diagnostic = Suppressed, diagnostic(p.Data.Suppression.Reason)
	default:
		return nil, nil
	}
	if e.ProviderMessageID == "" {
		return nil, fmt.Errorf("resend event %s: no data.email_id", p.Type)
	}
	at, err := time.Parse(time.RFC3339Nano, p.CreatedAt)
	if err != nil {
		return nil, fmt.Errorf("resend event %s: created_at: %w", p.Type, err)
	}
	e.OccurredAt = at
	out := make([]Event, 0, len(p.Data.To))
	for _, to := range p.Data.To {
		r := e
		r.Recipient, r.ID = to, svixID+"/"+to
		out = append(out, r)
	}
	return out, nil
}

// ParseSendGrid reads a SendGrid Event Webhook body: an array of events,
// each to one recipient. Its sg_message_id begins with the X-Message-Id
// the send was answered with.
func ParseSendGrid(body []byte) ([]Event, error) {
	var events []struct {
		Event     string      `json:"event"`
		Email     string      `json:"email"`
		Timestamp json.Number `json:"timestamp"`
		EventID   string      `json:"sg_event_id"`
		MessageID string      `json:"sg_message_id"`
		Type      string      `json:"type"`
		Status    string      `json:"status"`
		Reason    string      `json:"reason"`
		Response  string      `json:"response"`
	}
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, fmt.Errorf("sendgrid events: %w", err)
	}
	var out []Event
	for i, ev := range events {
		e := Event{ID: ev.EventID, Recipient: ev.Email, SMTPStatus: ev.Status}
		e.ProviderMessageID, _, _ = strings.Cut(ev.MessageID, ".")
		switch ev.Event {
		case "delivered":
			e.Type, e.Diagnostic = Delivered, diagnostic(ev.Response)
		case "bounce":
			// "bounce" is a hard bounce; "blocked" a soft one (SendGrid's
			// bounce types).
			e.Type, e.BounceType, e.Diagnostic = Bounced, Hard, diagnostic(ev.Reason)
			if ev.Type == "blocked" {
				e.BounceType = Soft
			}
		case "deferred":
			e.Type, e.Diagnostic = Delayed, diagnostic(ev.Response)
		case "dropped":
			// Dropped by SendGrid before sending: most often its own
			// suppression lists ("Bounced Address", "Unsubscribed Address").
			e.Type, e.Diagnostic = Suppressed, diagnostic(ev.Reason)
		case "spamreport":
			e.Type = Complained
		case "open":
			e.Type = Opened
		case "click":
			e.Type = Clicked
		default:
			continue
		}
		if e.ID == "" || e.ProviderMessageID == "" || e.Recipient == "" {
			return nil, fmt.Errorf("sendgrid event %d (%s): sg_event_id, sg_message_id and email are required", i, ev.Event)
		}
		secs, err := ev.Timestamp.Int64()
		if err != nil {
			return nil, fmt.Errorf("sendgrid event %d (%s): timestamp %q", i, ev.Event, ev.Timestamp)
		}
		e.OccurredAt = time.Unix(secs, 0).UTC()
		out = append(out, e)
	}
	return out, nil
}

// ParseMailgun reads a Mailgun webhook body's event-data: one event to one
// recipient. Mailgun's send API answered the id in angle brackets; the
// event's message-id header has none, and is given them back.
func ParseMailgun(body []byte) ([]Event, error) {
	var p struct {
		Data struct {
			ID        string  `json:"id"`
			Event     string  `json:"event"`
			Timestamp float64 `json:"timestamp"`
			Recipient string  `json:"recipient"`
			Severity  string  `json:"severity"`
			Reason    string  `json:"reason"`
			Message   struct {
				Headers struct {
					MessageID string `json:"message-id"`
				} `json:"headers"`
			} `json:"message"`
			DeliveryStatus struct {
				Code         json.RawMessage `json:"code"`
				EnhancedCode string          `json:"enhanced-code"`
				Message      string          `json:"message"`
				Description  string          `json:"description"`
			} `json:"delivery-status"`
		} `json:"event-data"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("mailgun event: %w", err)
	}
	d := p.Data
	e := Event{ID: d.ID, Recipient: d.Recipient, SMTPStatus: d.DeliveryStatus.EnhancedCode}
	if e.SMTPStatus == "" {
		e.SMTPStatus = strings.Trim(string(d.DeliveryStatus.Code), `"`)
		if e.SMTPStatus == "0" || e.SMTPStatus == "null" {
			e.SMTPStatus = ""
		}
	}
	text := d.DeliveryStatus.Description
	if text == "" {
		text = d.DeliveryStatus.Message
	}
	switch d.Event {
	case "delivered":
		e.Type = Delivered
	case "failed":
		switch {
		case strings.HasPrefix(d.Reason, "suppress-"):
			// Not sent: the address is on Mailgun's own list.
			e.Type, e.Diagnostic = Suppressed, diagnostic(d.Reason)
		case d.Severity == "permanent":
			e.Type, e.BounceType, e.Diagnostic = Bounced, Hard, diagnostic(text)
		default: // temporary: Mailgun tries again
			e.Type, e.Diagnostic = Delayed, diagnostic(text)
		}
	case "complained":
		e.Type = Complained
	case "opened":
		e.Type = Opened
	case "clicked":
		e.Type = Clicked
	default:
		return nil, nil
	}
	if id := strings.Trim(d.Message.Headers.MessageID, "<>"); id != "" {
		e.ProviderMessageID = "<" + id + ">"
	}
	if e.ID == "" || e.ProviderMessageID == "" || e.Recipient == "" {
		return nil, fmt.Errorf("mailgun event %s: id, message.headers.message-id and recipient are required", d.Event)
	}
	if d.Timestamp <= 0 || d.Timestamp >= 1e11 { // seconds: before the year 5138
		return nil, fmt.Errorf("mailgun event %s: timestamp %v", d.Event, d.Timestamp)
	}
	sec, frac := math.Modf(d.Timestamp) // to the microsecond, as Mailgun writes it
	e.OccurredAt = time.Unix(int64(sec), int64(math.Round(frac*1e6))*1e3).UTC()
	return []Event{e}, nil
}

// ParseSES reads the Message of an SNS notification from SES: a
// notification (notificationType) or an event of a configuration set
// (eventType), about one message and its recipients. snsID is the SNS
// MessageId, which names the event.
func ParseSES(snsID, message string) ([]Event, error) {
	type recipient struct {
		EmailAddress   string `json:"emailAddress"`
		Status         string `json:"status"`
		DiagnosticCode string `json:"diagnosticCode"`
	}
	var p struct {
		NotificationType string `json:"notificationType"`
		EventType        string `json:"eventType"`
		Mail             struct {
			MessageID   string   `json:"messageId"`
			Timestamp   string   `json:"timestamp"`
			Destination []string `json:"destination"`
		} `json:"mail"`
		Bounce struct {
			BounceType        string      `json:"bounceType"`
			BounceSubType     string      `json:"bounceSubType"`
			BouncedRecipients []recipient `json:"bouncedRecipients"`
			Timestamp         string      `json:"timestamp"`
		} `json:"bounce"`
		Complaint struct {
			ComplainedRecipients []recipient `json:"complainedRecipients"`
			Timestamp            string      `json:"timestamp"`
		} `json:"complaint"`
		Delivery struct {
			Recipients   []string `json:"recipients"`
			Timestamp    string   `json:"timestamp"`
			SMTPResponse string   `json:"smtpResponse"`
		} `json:"delivery"`
		DeliveryDelay struct {
			DelayedRecipients []recipient `json:"delayedRecipients"`
			Timestamp         string      `json:"timestamp"`
		} `json:"deliveryDelay"`
		Reject struct {
			Reason string `json:"reason"`
		} `json:"reject"`
		Open struct {
			Timestamp string `json:"timestamp"`
		} `json:"open"`
		Click struct {
			Timestamp string `json:"timestamp"`
		} `json:"click"`
	}
	if err := json.Unmarshal([]byte(message), &p); err != nil {
		return nil, fmt.Errorf("ses event: %w", err)
	}
	kind := p.EventType
	if kind == "" {
		kind = p.NotificationType
	}
	var (
		out  []Event
		when string
	)
	add := func(e Event) { out = append(out, e) }
	switch kind {
	case "Bounce":
		when = p.Bounce.Timestamp
		for _, r := range p.Bounce.BouncedRecipients {
			e := Event{Recipient: r.EmailAddress, Type: Bounced, BounceType: Soft, SMTPStatus: r.Status,
				Diagnostic: diagnostic(r.DiagnosticCode)}
			switch {
			case p.Bounce.BounceSubType == "OnSuppressionList" || p.Bounce.BounceSubType == "OnAccountSuppressionList":
				e.Type, e.BounceType = Suppressed, "" // SES's own list: not sent
			case p.Bounce.BounceType == "Permanent":
				e.BounceType = Hard
			}
			add(e)
		}
	case "Complaint":
		when = p.Complaint.Timestamp
		for _, r := range p.Complaint.ComplainedRecipients {
			add(Event{Recipient: r.EmailAddress, Type: Complained})
		}
	case "Delivery":
		when = p.Delivery.Timestamp
		for _, r := range p.Delivery.Recipients {
			add(Event{Recipient: r, Type: Delivered, Diagnostic: diagnostic(p.Delivery.SMTPResponse)})
		}
	case "DeliveryDelay":
		when = p.DeliveryDelay.Timestamp
		for _, r := range p.DeliveryDelay.DelayedRecipients {
			add(Event{Recipient: r.EmailAddress, Type: Delayed, SMTPStatus: r.Status, Diagnostic: diagnostic(r.DiagnosticCode)})
		}
	case "Reject", "Rendering Failure":
		when = p.Mail.Timestamp
		for _, r := range p.Mail.Destination {
			add(Event{Recipient: r, Type: Failed, Diagnostic: diagnostic(p.Reject.Reason)})
		}
	case "Open", "Click":
		typ := Opened
		when = p.Open.Timestamp
		if kind == "Click" {
			typ, when = Clicked, p.Click.Timestamp
		}
		for _, r := range p.Mail.Destination {
			add(Event{Recipient: r, Type: typ})
		}
	default:
		return nil, nil
	}
	if p.Mail.MessageID == "" {
		return nil, fmt.Errorf("ses event %s: no mail.messageId", kind)
	}
	at, err := time.Parse(time.RFC3339Nano, when)
	if err != nil {
		return nil, fmt.Errorf("ses event %s: timestamp: %w", kind, err)
	}
	for i := range out {
		out[i].ProviderMessageID, out[i].OccurredAt = p.Mail.MessageID, at
		out[i].ID = snsID + "/" + out[i].Recipient
	}
	return out, nil
}
