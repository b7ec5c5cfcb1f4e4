package config

import (
	"fmt"
	"regexp"
	"strings"
)

// repetition is a counted repetition at the start of a string, "{2}",
// "{1,3}" or "{2,}": in Go's regexp syntax the only meaning of '{'.
var repetition = regexp.MustCompile(`^\{[0-9]+(,[0-9]*)?\}`)

// SplitPatterns splits a comma-separated list of regular expressions
// (OUTBOUND_DOMAIN_ALLOWLIST, OUTBOUND_DOMAIN_BLOCKLIST) at the commas
// between them: those outside groups (), character classes [], counted
// repetitions {m,n}, escapes (\,) and \Q...\E, so that ev(il){1,2}\.com is
// one pattern, not "ev(il){1" and "2}\.com". Items are trimmed and empty
// ones dropped.
//
// A list whose commas cannot be told apart is an error naming the part
// that could not be split: a comma after a bracket never closed, or closed
// but never opened, or after a brace that is not a counted repetition (Go
// reads it as a literal brace, which no domain contains: the author meant
// something else).
func SplitPatterns(list string) ([]string, error) {
	var (
		items   []string
		start   int
		depth   int  // open groups
		inClass bool // inside [...]
	)
	// A bracket that does not pair is only ambiguous when a comma follows
	// it; otherwise the rest is one item, and compiling it says what is
	// wrong with it.
	ambiguous := func(from int, why string) ([]string, error) {
		rest := list[from:]
		if !strings.Contains(rest, ",") {
			return appendItem(items, rest), nil
		}
		return nil, fmt.Errorf(`ambiguous pattern "%s": %s, so its commas cannot be told apart`, strings.TrimSpace(rest), why)
	}
	for i := 0; i < len(list); i++ {
		c := list[i]
		switch {
		case c == '\\' && i+1 < len(list) && list[i+1] == 'Q':
			end := strings.Index(list[i+2:], `\E`)
			if end < 0 {
				i = len(list)
			} else {
				i += 2 + end + 1
			}
		case c == '\\':
			i++ // the escaped byte is literal, whatever it is
		case inClass:
			if c == '[' && i+1 < len(list) && list[i+1] == ':' { // [:alpha:]
				if end := strings.Index(list[i:], ":]"); end > 0 {
					i += end + 1
				}
			} else if c == ']' {
				inClass = false
			}
		case c == '[':
			inClass = true
			// "[]a]" and "[^]a]": a ']' first in a class is literal.
			if strings.HasPrefix(list[i+1:], "]") {
				i++
			} else if strings.HasPrefix(list[i+1:], "^]") {
				i += 2
			}
		case c == '(':
			depth++
		case c == ')':
			if depth == 0 {
				return ambiguous(start, `")" closes no group`)
			}
			depth--
		case c == '{':
			m := repetition.FindString(list[i:])
			if m == "" {
				return ambiguous(start, `"{" is not a counted repetition such as {1,3} (write \{ for a brace)`)
			}
			i += len(m) - 1
		case c == '}':
			return ambiguous(start, `"}" closes no repetition (write \} for a brace)`)
		case c == ',' && depth == 0:
			items = appendItem(items, list[start:i])
			start = i + 1
		}
	}
	switch {
	case inClass:
		return ambiguous(start, `"[" is never closed`)
	case depth > 0:
		return ambiguous(start, `"(" is never closed`)
	}
	return appendItem(items, list[start:]), nil
}

func appendItem(items []string, s string) []string {
	if s = strings.TrimSpace(s); s != "" {
		items = append(items, s)
	}
	return items
}
