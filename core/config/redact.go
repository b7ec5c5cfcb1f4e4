package config

import "strings"

// RedactURL is raw fit for an error message or a log line: the user
// information of a URL (user:password@, or a token@) and its query (which
// may carry a key=) are replaced by xxxxx, whether or not the rest parses:
// url.URL.Redacted needs a URL that parses, and a value that does not is
// exactly the one an error message quotes. A value without "://" is
// treated the same from its start.
func RedactURL(raw string) string {
	rest, scheme := raw, ""
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	// The authority ends at the first '/', '?' or '#'; its user
	// information, at its last '@'.
	end := len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		end = i
	}
	if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
		rest = "xxxxx" + rest[at:]
	}
	if q := strings.IndexByte(rest, '?'); q >= 0 {
		frag := ""
		if h := strings.IndexByte(rest[q:], '#'); h >= 0 {
			frag = rest[q+h:]
		}
		rest = rest[:q] + "?xxxxx" + frag
	}
	return scheme + rest
}
