package store

import (
	"strings"
	"unicode/utf8"

	"gorm.io/gorm"
)

// isText reports whether s can be compared with a text column on both
// databases. PostgreSQL refuses a NUL or invalid UTF-8 in a parameter (an
// error, which was a 500), where SQLite compares the bytes and finds
// nothing: such a key names no row on either, and the store says so
// itself rather than asking.
func isText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// notText is the answer to a lookup by a key that is not text.
func notText(what, key string) error {
	return wrap(gorm.ErrRecordNotFound, "%s %q", what, key)
}
