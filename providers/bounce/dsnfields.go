package bounce

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/mail"
	"net/textproto"
	"strings"
	"time"
	"unicode/utf8"
)

// statusBlocks splits a delivery-status body into its field blocks, each
// with CRLF line ends and a terminating blank line. Lines of white space
// only count as blank, as they do in the DSNs of some servers; trailing
// white space is dropped and control characters become spaces, which
// textproto would otherwise refuse.
func statusBlocks(body []byte) [][]byte {
	var (
		blocks [][]byte
		cur    []byte
	)
	flush := func() {
		if len(cur) > 0 {
			blocks = append(blocks, append(cur, '\r', '\n'))
			cur = nil
		}
	}
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, " \t\r\n")
		if len(line) == 0 {
			flush()
			continue
		}
		if len(cur) == 0 && (line[0] == ' ' || line[0] == '\t') {
			continue // a continuation of nothing
		}
		start := len(cur)
		cur = append(append(cur, line...), '\r', '\n')
		for i := start; i < len(cur)-2; i++ {
			if c := cur[i]; c < 0x20 && c != '\t' || c == 0x7f {
				cur[i] = ' ' // textproto refuses the field otherwise
			}
		}
	}
	flush()
	return blocks
}

func fieldCount(h mail.Header) int {
	n := 0
	for _, v := range h {
		n += len(v)
	}
	return n
}

// readFields reads one field block with textproto, which unfolds
// continuation lines.
func readFields(block []byte) (textproto.MIMEHeader, error) {
	if bytes.Count(block, []byte("\n")) > 2*maxFields {
		return nil, ErrTooLarge
	}
	return textproto.NewReader(bufio.NewReader(bytes.NewReader(block))).ReadMIMEHeader()
}

// originalHeaders reads the headers of the returned message. Headers
// that do not read leave the fields empty: the returned message only
// helps find the VERP address, and the DSN has others.
func originalHeaders(body []byte) OriginalHeaders {
	rd := io.MultiReader(bytes.NewReader(body), strings.NewReader("\r\n\r\n"))
	h, err := textproto.NewReader(bufio.NewReader(rd)).ReadMIMEHeader()
	if err != nil {
		return OriginalHeaders{}
	}
	return OriginalHeaders{
		ReturnPath: clean(h.Get("Return-Path"), 998),
		To:         clean(h.Get("To"), 998),
		MessageID:  clean(strings.Trim(strings.TrimSpace(h.Get("Message-Id")), "<>"), 998),
	}
}

// typedValue is the address of an address-typed field ("rfc822;a@x.org",
// "utf-8; a@x.org"); empty for another type (x400) or none.
func typedValue(v string) string {
	typ, addr, ok := strings.Cut(v, ";")
	if !ok {
		return ""
	}
	switch strings.ToLower(strings.TrimSpace(typ)) {
	case "rfc822", "utf-8":
		return clean(addr, 998)
	}
	return ""
}

// untyped drops a diagnostic type ("smtp;", "X-Postfix;") from v.
func untyped(v string) string {
	typ, rest, ok := strings.Cut(v, ";")
	if ok && len(typ) <= 32 && !strings.ContainsAny(strings.TrimSpace(typ), " \t") {
		return rest
	}
	return v
}

// statusCode is the enhanced status code at the start of v ("5.1.1
// (bad mailbox)"), or empty if there is none: class 2, 4 or 5, subject
// and detail of one to three digits (RFC 3463).
func statusCode(v string) string {
	s := firstWord(v)
	parts := strings.Split(s, ".")
	if len(parts) != 3 || len(parts[0]) != 1 || !strings.Contains("245", parts[0]) {
		return ""
	}
	for _, p := range parts[1:] {
		if len(p) == 0 || len(p) > 3 || strings.Trim(p, "0123456789") != "" {
			return ""
		}
	}
	return s
}

func firstWord(v string) string {
	f := strings.Fields(v)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

// clean makes v safe to keep: valid UTF-8, control characters turned into
// spaces, runs of space collapsed, at most max bytes cut on a rune
// boundary.
func clean(v string, max int) string {
	v = strings.ToValidUTF8(v, "\uFFFD")
	var b strings.Builder
	space := false
	for _, c := range v {
		if c < 0x20 || c == 0x7f || c >= 0x80 && c < 0xa0 || c == ' ' {
			space = b.Len() > 0
			continue
		}
		if space {
			if b.Len()+1 > max {
				break
			}
			b.WriteByte(' ')
			space = false
		}
		if b.Len()+utf8.RuneLen(c) > max {
			break
		}
		b.WriteRune(c)
	}
	return b.String()
}

// parseDate reads an RFC 5322 date, as DSN date fields are written.
func parseDate(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, errors.New("no date")
	}
	return mail.ParseDate(v)
}
