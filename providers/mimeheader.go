package providers

import (
	"fmt"
	"mime"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Header fields that go-mail would write wrongly: it folds only at spaces,
// so a subject without them made a line over RFC 5322's 998 octets, and it
// puts RFC 2047 encoded words inside a quoted filename parameter, which
// RFC 2047 §5 forbids and which a 255-character name turned into a
// 1,911-octet Content-Disposition line (a multipart part's header is not
// folded at all). These are written here instead, every line within 78
// octets where a line can be broken at all, and never over 998.

// foldAt is the line length RFC 5322 §2.1.1 asks for, CRLF excluded.
const foldAt = 78

// maxLine is the line length RFC 5322 §2.1.1 requires, CRLF excluded.
const maxLine = 998

// maxEncodedWord is RFC 2047's limit on one encoded word.
const maxEncodedWord = 75

// foldUnstructured returns the value of the unstructured header field name
// (Subject), folded with CRLF SP: printable ASCII is folded at single
// spaces between words and kept as it is when that keeps every line within
// 998 octets; anything else (non-ASCII, a word too long to fold, blanks at
// either end, which readers trim, text a reader would take for an encoded
// word) is written as RFC 2047 encoded words of at most 75 octets, one per
// line, which read back as the value, every space kept.
func foldUnstructured(name, value string) string {
	if plain, ok := foldPlain(name, value); ok {
		return plain
	}
	return strings.Join(encodeWords(value, foldAt-len(name)-len(": ")), "\r\n ")
}

// foldPlain folds printable ASCII greedily within 78 octets, breaking only
// before a single space between two words: readers unfold a break with the
// blanks around it into one space (Go's net/textproto does), so that is
// the only break that reads back exactly. ok is false when the value
// cannot be sent as it is.
func foldPlain(name, value string) (string, bool) {
	if strings.Contains(value, "=?") || strings.Trim(value, " \t") != value {
		return "", false
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; (c < ' ' && c != '\t') || c > '~' {
			return "", false
		}
	}
	blank := func(i int) bool { return value[i] == ' ' || value[i] == '\t' }
	var b strings.Builder
	col := len(name) + len(": ")
	for start := 0; start < len(value); {
		// The token runs to the next break: a lone space between words.
		end := start + 1
		for end < len(value) && !(value[end] == ' ' && !blank(end-1) && end+1 < len(value) && !blank(end+1)) {
			end++
		}
		tok := value[start:end]
		if start > 0 && col+len(tok) > foldAt {
			b.WriteString("\r\n")
			col = 0
		}
		if col+len(tok) > maxLine {
			return "", false
		}
		b.WriteString(tok)
		col += len(tok)
		start = end
	}
	return b.String(), true
}

// encodeWords encodes s as RFC 2047 Q-encoded UTF-8 words of at most 75
// octets, the first at most first octets long (the rest of its line), and
// never splitting a character between two words (RFC 2047 §5).
func encodeWords(s string, first int) []string {
	const prefix, suffix = "=?UTF-8?q?", "?="
	limit := min(max(first, len(prefix)+len(suffix)+12), maxEncodedWord)
	var words []string
	var w strings.Builder
	w.WriteString(prefix)
	for len(s) > 0 {
		_, n := utf8.DecodeRuneInString(s)
		var enc strings.Builder
		for i := range n {
			c := s[i]
			switch {
			case c == ' ':
				enc.WriteByte('_')
			case c > ' ' && c <= '~' && c != '=' && c != '?' && c != '_':
				enc.WriteByte(c)
			default:
				fmt.Fprintf(&enc, "=%02X", c)
			}
		}
		if w.Len()+enc.Len()+len(suffix) > limit && w.Len() > len(prefix) {
			w.WriteString(suffix)
			words = append(words, w.String())
			w.Reset()
			w.WriteString(prefix)
			limit = maxEncodedWord
		}
		w.WriteString(enc.String())
		s = s[n:]
	}
	w.WriteString(suffix)
	return append(words, w.String())
}

// attachmentHeaders returns an attachment's Content-Type and Content-Disposition,
// the file name in both: quoted when it is short printable ASCII,
// otherwise as RFC 2231 parameter continuations (name*0*=UTF-8”...;
// name*1*=...), which carry any length and any character. The values are
// folded for a part header, which go-mail writes as it is.
func attachmentHeaders(a Attachment) (contentType, disposition string, err error) {
	name := safeFilename(a.Filename)
	mt := a.ContentType
	if mt == "" {
		if mt = mime.TypeByExtension(filepath.Ext(name)); mt == "" {
			mt = "application/octet-stream"
		}
	} else if parsed, params, err := mime.ParseMediaType(mt); err != nil || len(params) > 0 || !strings.Contains(parsed, "/") {
		// The API accepts only a bare type/subtype; anything else here
		// could add parameters of its own.
		return "", "", fmt.Errorf("smtp: attachment %q has an invalid content type", a.Filename)
	}
	kind := "attachment"
	if a.Inline {
		kind = "inline"
	}
	return withParam("Content-Type", mt, "name", name), withParam("Content-Disposition", kind, "filename", name), nil
}

// withParam is value with the parameter key=v appended, folded for the
// header field (named field) it goes in.
func withParam(field, value, key, v string) string {
	var segs []string
	if quotable(v) && len(" "+key+`="`+v+`"`) <= foldAt {
		segs = []string{key + `="` + v + `"`}
	} else {
		segs = continuations(key, v)
	}
	var b strings.Builder
	b.WriteString(value)
	col := len(field) + len(": ") + len(value)
	for _, s := range segs {
		b.WriteByte(';')
		col++
		if col+1+len(s) > foldAt {
			b.WriteString("\r\n")
			col = 0
		}
		b.WriteString(" " + s)
		col += 1 + len(s)
	}
	return b.String()
}

// quotable reports a value that goes in a quoted-string as it is:
// printable ASCII without '"' or '\'.
func quotable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// continuations is v as RFC 2231 extended parameter segments, key*0*= with
// the charset, key*1*=... each short enough for a line of its own, a
// character never split between two.
func continuations(key, v string) []string {
	var segs []string
	var seg strings.Builder
	head := func() string {
		h := fmt.Sprintf("%s*%d*=", key, len(segs))
		if len(segs) == 0 {
			h += "UTF-8''"
		}
		return h
	}
	seg.WriteString(head())
	for len(v) > 0 {
		_, n := utf8.DecodeRuneInString(v)
		var enc strings.Builder
		for i := range n {
			if c := v[i]; attributeChar(c) {
				enc.WriteByte(c)
			} else {
				fmt.Fprintf(&enc, "%%%02X", c)
			}
		}
		// " " before it and ";" after it on its line.
		if 1+seg.Len()+enc.Len()+1 > foldAt && seg.Len() > len(head()) {
			segs = append(segs, seg.String())
			seg.Reset()
			seg.WriteString(head())
		}
		seg.WriteString(enc.String())
		v = v[n:]
	}
	return append(segs, seg.String())
}

// attributeChar reports an octet RFC 2231 lets stand for itself in an
// extended value: printable ASCII but space, '*', '\”, '%' and the
// tspecials of RFC 2045.
func attributeChar(c byte) bool {
	return c > ' ' && c <= '~' && !strings.ContainsRune(`*'%()<>@,;:\"/[]?=`, rune(c))
}

// safeFilename replaces what a file name must not carry into a mail
// client's file system, as go-mail does: control characters, '"', '/',
// ':', '<', '>', '?', '\', '|' and DEL become '_'.
func safeFilename(s string) string {
	return strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f || strings.ContainsRune(`"/:<>?\|`, r) {
			return '_'
		}
		return r
	}, s)
}
