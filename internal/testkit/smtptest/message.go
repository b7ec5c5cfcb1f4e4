package smtptest

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"slices"
	"strings"
	"time"
)

// Message is one message accepted by the server: its envelope, the raw
// data, and the parts decoded for assertions.
type Message struct {
	// From and To are the envelope (MAIL FROM and RCPT TO), which is
	// where Bcc recipients show up.
	From string
	To   []string
	// TLS reports that the message arrived on a TLS connection (STARTTLS
	// or implicit).
	TLS bool
	// Received is when the server had read the whole message, final "."
	// included: the moment it could queue it. A test compares it with a
	// client's deadline.
	Received time.Time
	// Data is the message exactly as received, after dot-unstuffing.
	Data []byte
	// Header is the top-level header as parsed by net/mail; encoded words
	// (RFC 2047) are left as they are.
	Header mail.Header
	// Text and HTML are the decoded text/plain and text/html body parts,
	// with line endings normalised to "\n".
	Text, HTML string
	// Attachments are the other leaf parts, and text parts that carry a
	// file name or an "attachment" disposition.
	Attachments []Part
	// ParseErr is set when Data is not a well-formed MIME message; the
	// fields above then hold what could be read before the error.
	ParseErr error
}

// Part is one attachment or inline part.
type Part struct {
	Filename    string // RFC 2047 words decoded
	ContentType string // media type without parameters, e.g. "image/png"
	ContentID   string // without the angle brackets
	Disposition string // "attachment", "inline" or ""
	Content     []byte // transfer encoding removed
}

func (m Message) clone() Message {
	c := m
	c.To = slices.Clone(m.To)
	c.Data = slices.Clone(m.Data)
	if m.Header != nil {
		c.Header = mail.Header(maps.Clone(m.Header))
		for k, v := range c.Header {
			c.Header[k] = slices.Clone(v)
		}
	}
	c.Attachments = slices.Clone(m.Attachments)
	for i := range c.Attachments {
		c.Attachments[i].Content = slices.Clone(m.Attachments[i].Content)
	}
	return c
}

// parse decodes raw into a Message without the envelope.
func parse(raw []byte) Message {
	m := Message{Data: raw}
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		m.ParseErr = err
		return m
	}
	m.Header = msg.Header
	w := walker{m: &m}
	m.ParseErr = w.walk(textproto.MIMEHeader(msg.Header), msg.Body)
	return m
}

// walker fills a Message from a MIME tree, depth first.
type walker struct {
	m                  *Message
	seenText, seenHTML bool
}

func (w *walker) walk(h textproto.MIMEHeader, body io.Reader) error {
	ct := h.Get("Content-Type")
	if ct == "" {
		ct = "text/plain; charset=us-ascii" // RFC 2045's default
	}
	mediaType, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return fmt.Errorf("content-type %q: %w", ct, err)
	}
	if strings.HasPrefix(mediaType, "multipart/") {
		// NextRawPart, because NextPart decodes quoted-printable only and
		// hides the header that says so.
		mr := multipart.NewReader(body, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("%s: %w", mediaType, err)
			}
			if err := w.walk(p.Header, p); err != nil {
				return err
			}
		}
	}

	content, err := decode(h.Get("Content-Transfer-Encoding"), body)
	if err != nil {
		return fmt.Errorf("%s part: %w", mediaType, err)
	}
	var disposition, filename string
	if d := h.Get("Content-Disposition"); d != "" {
		var dparams map[string]string
		disposition, dparams, err = mime.ParseMediaType(d)
		if err != nil {
			return fmt.Errorf("content-disposition %q: %w", d, err)
		}
		filename = dparams["filename"]
	}
	if filename == "" {
		filename = params["name"]
	}
	filename = decodeWords(filename)

	isBody := disposition != "attachment" && filename == ""
	switch {
	case isBody && mediaType == "text/plain" && !w.seenText:
		w.seenText, w.m.Text = true, normaliseEOL(content)
	case isBody && mediaType == "text/html" && !w.seenHTML:
		w.seenHTML, w.m.HTML = true, normaliseEOL(content)
	default:
		w.m.Attachments = append(w.m.Attachments, Part{
			Filename:    filename,
			ContentType: mediaType,
			ContentID:   strings.TrimSuffix(strings.TrimPrefix(h.Get("Content-ID"), "<"), ">"),
			Disposition: disposition,
			Content:     content,
		})
	}
	return nil
}

func decode(cte string, r io.Reader) ([]byte, error) {
	switch strings.ToLower(strings.TrimSpace(cte)) {
	case "base64":
		r = base64.NewDecoder(base64.StdEncoding, r)
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	}
	return io.ReadAll(r)
}

func decodeWords(s string) string {
	var dec mime.WordDecoder
	if d, err := dec.DecodeHeader(s); err == nil {
		return d
	}
	return s
}

func normaliseEOL(b []byte) string {
	return strings.ReplaceAll(string(b), "\r\n", "\n")
}
