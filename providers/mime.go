package providers

import (
	"bytes"
	"errors"
	"fmt"
	netmail "net/mail"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/wneessen/go-mail"

	"github.com/nornweave/nornweave/core/address"
)

// buildMsg encodes m as a go-mail message. Header values were validated
// upstream, but a CR or LF here would let one header forge another, so it
// is checked again.
func (p *SMTP) buildMsg(m Message) (*mail.Msg, error) {
	if err := checkHeaderValues(m); err != nil {
		return nil, err
	}
	if m.RecipientCount() == 0 {
		return nil, errors.New("smtp: message has no recipients")
	}
	msg := mail.NewMsg(mail.WithNoDefaultUserAgent())

	from, err := netmail.ParseAddress(m.From)
	if err != nil {
		return nil, fmt.Errorf("smtp: invalid from address %q: %w", m.From, err)
	}
	from.Name = m.FromName
	msg.FromMailAddress(from)
	if m.ReturnPath != "" {
		if err := msg.EnvelopeFrom(m.ReturnPath); err != nil {
			return nil, fmt.Errorf("smtp: invalid return path %q: %w", m.ReturnPath, err)
		}
	}
	for _, h := range []struct {
		header mail.AddrHeader
		addrs  []address.Address
	}{{mail.HeaderTo, m.To}, {mail.HeaderCc, m.Cc}, {mail.HeaderBcc, m.Bcc}, {mail.HeaderReplyTo, m.ReplyTo}} {
		if len(h.addrs) == 0 {
			continue // an empty list would still write an empty header
		}
		// The canonical values as they are: re-parsing a string here could
		// disagree with what the domain filter judged.
		mas := make([]*netmail.Address, len(h.addrs))
		for i, a := range h.addrs {
			mas[i] = a.Mail()
		}
		msg.SetAddrHeaderFromMailAddress(h.header, mas...)
	}

	// Folded here: go-mail folds only at spaces (see mimeheader.go).
	msg.SetGenHeaderPreformatted(mail.HeaderSubject, foldUnstructured("Subject", m.Subject))
	date := m.Date
	if date.IsZero() {
		date = p.now()
	}
	msg.SetDateWithValue(date)
	if m.MessageID != "" {
		// go-mail adds the angle brackets that m.MessageID already carries.
		msg.SetMessageIDWithValue(strings.TrimSuffix(strings.TrimPrefix(m.MessageID, "<"), ">"))
	}
	if m.InReplyTo != "" {
		msg.SetGenHeader(mail.HeaderInReplyTo, m.InReplyTo)
	}
	if len(m.References) > 0 {
		msg.SetGenHeader(mail.HeaderReferences, strings.Join(m.References, " "))
	}

	msg.SetBodyString(mail.TypeTextPlain, m.Text)
	if m.HTML != "" {
		msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	}
	for _, a := range m.Attachments {
		// The name goes in Content-Type and Content-Disposition written
		// here (RFC 2231 when it must), which go-mail then keeps.
		contentType, disposition, err := attachmentHeaders(a)
		if err != nil {
			return nil, err
		}
		opts := []mail.FileOption{func(f *mail.File) {
			f.Header.Set(string(mail.HeaderContentType), contentType)
			f.Header.Set(string(mail.HeaderContentDisposition), disposition)
		}}
		// ReadSeeker variants: go-mail would copy an io.Reader's content.
		if a.Inline {
			if cid := strings.Trim(a.ContentID, "<>"); cid != "" {
				opts = append(opts, mail.WithFileContentID("<"+cid+">"))
			}
			msg.EmbedReadSeeker(a.Filename, bytes.NewReader(a.Content), opts...)
			continue
		}
		msg.AttachReadSeeker(a.Filename, bytes.NewReader(a.Content), opts...)
	}
	return msg, nil
}

func checkHeaderValues(m Message) error {
	type field struct {
		name   string
		values []string
	}
	fields := []field{
		{"from", []string{m.From, m.FromName}},
		{"to", addrStrings(m.To)}, {"cc", addrStrings(m.Cc)}, {"bcc", addrStrings(m.Bcc)},
		{"reply-to", addrStrings(m.ReplyTo)},
		{"subject", []string{m.Subject}},
		{"message-id", []string{m.MessageID}},
		{"in-reply-to", []string{m.InReplyTo}},
		{"references", m.References},
	}
	for i, a := range m.Attachments {
		fields = append(fields, field{fmt.Sprintf("attachment %d", i), []string{a.Filename, a.ContentType, a.ContentID}})
	}
	for _, f := range fields {
		for _, v := range f.values {
			if strings.ContainsAny(v, "\r\n") {
				return fmt.Errorf("smtp: %s contains a line break", f.name)
			}
			if !utf8.ValidString(v) {
				return fmt.Errorf("smtp: %s is not valid UTF-8", f.name)
			}
			// Other controls (NUL, DEL, ...) make a header line that
			// parsers reject or read differently (found by FuzzBuildMIME).
			if strings.ContainsFunc(v, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
				return fmt.Errorf("smtp: %s contains a control character", f.name)
			}
		}
	}
	// A message id cannot be folded: one that does not fit on a header
	// line of 998 octets ("In-Reply-To: <...>") cannot be written.
	ids := append([]string{m.MessageID, m.InReplyTo}, m.References...)
	for _, a := range m.Attachments {
		ids = append(ids, a.ContentID)
	}
	for _, id := range ids {
		if len(id) > maxMessageID {
			return fmt.Errorf("smtp: a message id is longer than %d octets", maxMessageID)
		}
	}
	return nil
}

// maxMessageID is the longest msg-id (or Content-ID) written: with its
// field name it fits a line of 998 octets.
const maxMessageID = 900

func addrStrings(l []address.Address) []string {
	out := make([]string, len(l))
	for i, a := range l {
		out[i] = a.Name + a.AddrSpec()
	}
	return out
}

// encodeMIME returns m encoded exactly as the SMTP provider sends it, for
// the APIs that take raw MIME. go-mail never writes the Bcc header: the
// caller must pass the Bcc recipients in the envelope.
func encodeMIME(m Message, now func() time.Time) ([]byte, error) {
	msg, err := (&SMTP{now: now}).buildMsg(m)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return nil, fmt.Errorf("encode message: %w", err)
	}
	return buf.Bytes(), nil
}
