package api

import (
	"errors"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// checkRawQuery parses the raw query as url.ParseQuery does and refuses it
// whole, 422 naming the parameter, if any pair does not parse (a ";"
// separator, a "%" that is not an escape). r.URL.Query() drops such a pair
// in silence: "?inbox_id=x&q=y;" listed every message of the inbox as if
// q had not been given.
func checkRawQuery(raw string) error {
	if _, err := url.ParseQuery(raw); err == nil {
		return nil
	}
	for pair := range strings.SplitSeq(raw, "&") {
		_, err := url.ParseQuery(pair)
		if err == nil {
			continue
		}
		key, _, _ := strings.Cut(pair, "=")
		name, kerr := url.QueryUnescape(key)
		if kerr != nil {
			name = key
		}
		return fieldError("Query parameter does not parse: "+clip(err.Error()), "value_error", "query", clip(name))
	}
	return nil // not reached: a query that fails has a pair that fails
}

// rfc3339 is RFC 3339's date-time (section 5.6) by its grammar: a "T"
// (either case), a "." before fractions only, and an offset "Z" or ±hh:mm.
// The ranges of each number are checked by time.Parse and offsetInRange.
var rfc3339 = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-](\d{2}):(\d{2}))$`)

// errNotRFC3339 is what parseRFC3339 refuses.
var errNotRFC3339 = errors.New("not an RFC 3339 date-time")

// parseRFC3339 reads an RFC 3339 date-time with an offset, and nothing
// RFC 3339 does not allow: time.Parse also takes offsets of +24:00 or
// +00:60 and a "," before fractions. Every time an API caller gives is
// read here.
func parseRFC3339(s string) (time.Time, error) {
	m := rfc3339.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, errNotRFC3339
	}
	if m[3] != "" && (m[3] > "23" || m[4] > "59") {
		return time.Time{}, errNotRFC3339
	}
	norm := []byte(s)
	norm[10] = 'T'
	if last := len(norm) - 1; norm[last] == 'z' {
		norm[last] = 'Z'
	}
	t, err := time.Parse(time.RFC3339Nano, string(norm))
	if err != nil {
		return time.Time{}, errNotRFC3339
	}
	return t, nil
}
