// Package providers delivers outbound email. Each provider is a concrete
// type with a Send method; the send pipeline in package skuld declares the
// interface it needs, so nothing here knows about HTTP, throttling or storage.
package providers

import (
	"time"

	"github.com/nornweave/nornweave/core/address"
)

// Message is one fully prepared outbound email. Every header value has
// already been validated (no CR/LF) and the HTML already rendered: a provider
// only encodes and delivers it.
type Message struct {
	// MessageID is the Message-ID header value, angle brackets included:
	// "<uuid@sending-domain>".
	MessageID string
	Date      time.Time
	From      string // bare address of the sending inbox
	FromName  string // display name, may be empty
	// To, Cc, Bcc and ReplyTo are canonical addresses, parsed once by the
	// API: the envelope uses their AddrSpec and the headers their String,
	// and nothing re-parses them.
	To      []address.Address
	Cc      []address.Address
	Bcc     []address.Address
	ReplyTo []address.Address
	Subject string
	// Text is the Markdown body, sent as the text/plain part.
	Text string
	// HTML is the text/html part.
	HTML string
	// InReplyTo and References thread a reply; both empty on a new thread.
	// Values carry their angle brackets.
	InReplyTo   string
	References  []string
	Attachments []Attachment
	// ReturnPath, when set, is the envelope sender (MAIL FROM) instead of
	// From: a VERP address that bounces come back to (providers/bounce).
	// Only the SMTP provider uses it; hosted providers report bounces by
	// their webhooks.
	ReturnPath string
}

// Attachment is one file sent with a Message.
type Attachment struct {
	Filename    string
	ContentType string
	Content     []byte
	// Inline marks a Content-Disposition: inline part referenced from the
	// HTML through its ContentID ("cid:..."); otherwise it is an attachment.
	Inline    bool
	ContentID string
}

// RecipientCount is the number of envelope recipients: To, Cc and Bcc.
func (m Message) RecipientCount() int {
	return len(m.To) + len(m.Cc) + len(m.Bcc)
}

// addrSpecs is the envelope form of addresses: the bare addr-specs.
func addrSpecs(l []address.Address) []string {
	out := make([]string, len(l))
	for i, a := range l {
		out[i] = a.AddrSpec()
	}
	return out
}

// addrHeaders is the header form of addresses, display names included.
func addrHeaders(l []address.Address) []string {
	out := make([]string, len(l))
	for i, a := range l {
		out[i] = a.String()
	}
	return out
}

// minTransferRate is the slowest link a message is assumed to cross,
// 256 KiB/s (about 2 Mbit/s): a 25 MiB attachment may legitimately take
// 100 s to hand over, far past a timeout fit for a short message.
const minTransferRate = 256 << 10

// TransferAllowance is the time a message of size bytes may take to
// transmit at the slowest rate assumed, added to a provider's timeout.
func TransferAllowance(size int) time.Duration {
	return time.Duration(size) * time.Second / minTransferRate
}

// Size is the bytes of content in m: both bodies and the attachments.
func (m Message) Size() int {
	n := len(m.Text) + len(m.HTML)
	for _, a := range m.Attachments {
		n += len(a.Content)
	}
	return n
}
