package address

import (
	"unicode"
	"unicode/utf8"
)

// CheckText reports whether s can go into a header as text: a subject, an
// attachment's filename, a display name. It refuses invalid UTF-8 and
// every character that breaks or disguises a header line: C0 controls but
// the tab (VT, FF, ESC, BS, ...), DEL, C1 controls (NEL, CSI, ...), the
// Unicode line and paragraph separators, which some clients render as line
// breaks, and the bidirectional embeddings, overrides and isolates, which
// make "invoice\u202Efdp.exe" display as "invoiceexe.pdf". Such text could
// not be sent: the provider refused it or failed on it after the message
// was recorded.
func CheckText(s string) error {
	if !utf8.ValidString(s) {
		return ErrControl
	}
	for _, r := range s {
		if r != '\t' && isControl(r) {
			return ErrControl
		}
	}
	return nil
}

// hasControl reports a character CheckText refuses, or a tab: an address
// and a display name have no use for one.
func hasControl(s string) bool {
	for _, r := range s {
		if isControl(r) {
			return true
		}
	}
	return false
}

func isControl(r rune) bool {
	return unicode.IsControl(r) || r == '\u2028' || r == '\u2029' ||
		('\u202A' <= r && r <= '\u202E') || ('\u2066' <= r && r <= '\u2069')
}
