package bounce

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
)

// Bounds on a notification. A DSN is a few kilobytes; the returned message
// may be the whole original, which the SMTP provider caps well below
// MaxDSNSize, and a larger one is not worth reading for its headers.
const (
	// MaxDSNSize is the largest notification ParseDSN reads.
	MaxDSNSize = 1 << 20
	// MaxRecipients bounds the per-recipient groups of one notification.
	// A DSN for a VERP address names one recipient; a few more are
	// tolerated (an alias expanded), hundreds are not a DSN of ours.
	MaxRecipients = 100
	// MaxDiagnostic bounds Diagnostic-Code text, as webhook events do.
	MaxDiagnostic = 1000
	maxParts      = 16  // parts of the multipart/report read
	maxEnvelope   = 16  // envelope addresses gathered from the headers
	maxFields     = 200 // header fields of one block
)

// Errors of ParseDSN.
var (
	// ErrNotDSN: the message is not a delivery status notification
	// (multipart/report; report-type=delivery-status): an auto-reply, a
	// vacation notice, a challenge, spam, or a bounce in a free-text
	// format. It says nothing about delivery and is not a bounce.
	ErrNotDSN = errors.New("not a delivery status notification")
	// ErrTooLarge: the message or one of its parts exceeds a bound.
	ErrTooLarge = errors.New("delivery status notification too large")
)

// Report is a delivery status notification, read but not yet trusted:
// every field is what the reporting server (or whoever wrote the message)
// says. VERP.Attribute decides what of it is ours.
type Report struct {
	// MessageID is the notification's own Message-ID, without brackets.
	MessageID string
	// Date is the notification's Date header; zero if absent or unreadable.
	Date time.Time
	// Envelope holds the addresses the notification was sent to, in order
	// of trust: Delivered-To, X-Original-To, Envelope-To, To, then the
	// Return-Path of the returned original. One of them is the VERP
	// address when the DSN is a bounce of ours.
	Envelope []string
	// ReportingMTA is the per-message Reporting-MTA field.
	ReportingMTA string
	// ArrivalDate is the per-message Arrival-Date field; zero if absent.
	ArrivalDate time.Time
	// Recipients are the per-recipient groups, at most MaxRecipients.
	Recipients []RecipientStatus
	// Original holds the headers of the returned message, when present.
	Original OriginalHeaders
}

// RecipientStatus is one per-recipient field group of a DSN.
type RecipientStatus struct {
	// FinalRecipient and OriginalRecipient are the addresses without their
	// address type ("rfc822;"); OriginalRecipient is often absent.
	FinalRecipient    string
	OriginalRecipient string
	// Action is lower case: failed, delayed, delivered, relayed, expanded.
	Action string
	// Status is the enhanced status code (5.1.1), or empty if the field is
	// missing or malformed.
	Status string
	// Diagnostic is the Diagnostic-Code text without its type ("smtp;"),
	// valid UTF-8 without control characters, at most MaxDiagnostic bytes.
	Diagnostic string
	// LastAttemptDate is zero if absent or unreadable.
	LastAttemptDate time.Time
}

// OriginalHeaders are the headers of the returned message (a
// text/rfc822-headers or message/rfc822 part).
type OriginalHeaders struct {
	ReturnPath string
	To         string
	MessageID  string
}

// ParseDSN reads raw, a whole message as delivered to the bounce mailbox,
// as an RFC 3464 delivery status notification (or its RFC 6533 UTF-8
// variant). It answers ErrNotDSN for any other message, whatever its
// subject or Auto-Submitted header says (DSNs carry Auto-Submitted too),
// and ErrTooLarge beyond MaxDSNSize or MaxRecipients. Lines may end in
// CRLF or LF.
func ParseDSN(raw []byte) (Report, error) {
	if len(raw) > MaxDSNSize {
		return Report{}, fmt.Errorf("bounce: message of %d bytes: %w", len(raw), ErrTooLarge)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return Report{}, fmt.Errorf("bounce: %w: headers: %w", ErrNotDSN, err)
	}
	if n := fieldCount(msg.Header); n > maxFields {
		return Report{}, fmt.Errorf("bounce: %d header fields: %w", n, ErrTooLarge)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mediaType != "multipart/report" {
		return Report{}, fmt.Errorf("bounce: %w: content type %q", ErrNotDSN, mediaType)
	}
	reportType := strings.ToLower(params["report-type"])
	if reportType != "delivery-status" && reportType != "global-delivery-status" {
		return Report{}, fmt.Errorf("bounce: %w: report type %q", ErrNotDSN, reportType)
	}
	if params["boundary"] == "" {
		return Report{}, fmt.Errorf("bounce: %w: multipart/report without a boundary", ErrNotDSN)
	}

	r := Report{MessageID: strings.Trim(strings.TrimSpace(msg.Header.Get("Message-Id")), "<>")}
	r.Date, _ = parseDate(msg.Header.Get("Date"))
	for _, k := range []string{"Delivered-To", "X-Original-To", "Envelope-To", "To"} {
		for _, v := range msg.Header[textproto.CanonicalMIMEHeaderKey(k)] {
			r.addEnvelope(v)
		}
	}

	var status []byte
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for i := 0; ; i++ {
		if i == maxParts {
			return Report{}, fmt.Errorf("bounce: more than %d parts: %w", maxParts, ErrTooLarge)
		}
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if status != nil {
				break // a damaged tail does not undo the status already read
			}
			return Report{}, fmt.Errorf("bounce: %w: multipart: %w", ErrNotDSN, err)
		}
		partType, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch partType {
		case "message/delivery-status", "message/global-delivery-status":
			if status == nil {
				status, err = readPart(p)
				if err != nil {
					return Report{}, fmt.Errorf("bounce: %w: delivery-status part: %w", ErrNotDSN, err)
				}
			}
		case "text/rfc822-headers", "message/rfc822", "message/global", "message/global-headers":
			if r.Original == (OriginalHeaders{}) {
				if body, err := readPart(p); err == nil {
					r.Original = originalHeaders(body)
				}
			}
		}
	}
	if status == nil {
		return Report{}, fmt.Errorf("bounce: %w: no message/delivery-status part", ErrNotDSN)
	}
	if err := r.readStatus(status); err != nil {
		return Report{}, err
	}
	if r.Original.ReturnPath != "" {
		r.addEnvelope(r.Original.ReturnPath)
	}
	return r, nil
}

// readPart reads a part's body, decoding base64 (quoted-printable is
// decoded by multipart itself).
func readPart(p *multipart.Part) ([]byte, error) {
	var rd io.Reader = p
	if strings.EqualFold(strings.TrimSpace(p.Header.Get("Content-Transfer-Encoding")), "base64") {
		rd = base64.NewDecoder(base64.StdEncoding, p)
	}
	return io.ReadAll(io.LimitReader(rd, MaxDSNSize))
}

// addEnvelope adds the addresses of one header value, if they parse.
func (r *Report) addEnvelope(v string) {
	list, err := mail.ParseAddressList(v)
	if err != nil {
		return
	}
	for _, a := range list {
		if len(r.Envelope) == maxEnvelope {
			return
		}
		r.Envelope = append(r.Envelope, a.Address)
	}
}

// readStatus reads the body of a message/delivery-status part: the
// per-message field block, then per-recipient blocks, separated by blank
// lines.
func (r *Report) readStatus(body []byte) error {
	blocks := statusBlocks(body)
	if len(blocks) == 0 {
		return fmt.Errorf("bounce: %w: empty delivery-status part", ErrNotDSN)
	}
	// The per-message block comes first; a server that leaves it out
	// (it is required) starts with a recipient's block, read as one.
	if h, err := readFields(blocks[0]); err == nil && h.Get("Final-Recipient") == "" {
		r.ReportingMTA = clean(h.Get("Reporting-Mta"), 255)
		r.ArrivalDate, _ = parseDate(h.Get("Arrival-Date"))
		blocks = blocks[1:]
	}
	for _, b := range blocks {
		h, err := readFields(b)
		if err != nil {
			continue // a group that does not read names no recipient
		}
		if len(r.Recipients) == MaxRecipients {
			return fmt.Errorf("bounce: more than %d recipient groups: %w", MaxRecipients, ErrTooLarge)
		}
		rs := RecipientStatus{
			FinalRecipient:    typedValue(h.Get("Final-Recipient")),
			OriginalRecipient: typedValue(h.Get("Original-Recipient")),
			Action:            strings.ToLower(firstWord(h.Get("Action"))),
			Status:            statusCode(h.Get("Status")),
			Diagnostic:        clean(untyped(h.Get("Diagnostic-Code")), MaxDiagnostic),
		}
		rs.LastAttemptDate, _ = parseDate(h.Get("Last-Attempt-Date"))
		r.Recipients = append(r.Recipients, rs)
	}
	return nil
}
