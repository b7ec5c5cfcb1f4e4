package api

import "unicode/utf8"

// maxJSONDepth bounds the nesting of a request body. The deepest body the
// API reads is four levels ({"attachments": [{"filename": ...}]}); without
// a bound, 10,000 levels in 20 KB cost every step below one frame per level.
const maxJSONDepth = 64

// maxJSONProblems bounds the problems checkJSON reports: each names its
// location, and a body of a million duplicate keys needs no million answers.
const maxJSONProblems = 50

// tooDeep reports whether data nests arrays and objects deeper than max. It
// reads each byte once and keeps one counter, so it costs nothing per level
// and can run before anything decodes the body.
func tooDeep(data []byte, max int) bool {
	depth, inString := 0, false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case inString:
			inString = c != '"'
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// checkJSON rejects what encoding/json would let through silently: invalid
// UTF-8 (decoded as U+FFFD), lone surrogate escapes (the same), a NUL in any
// string (PostgreSQL refuses it in text, so it was a 500 there and a 201 on
// SQLite), a key given twice (the last would win) and data after the value.
// The body must already be syntactically valid JSON up to its first value,
// and no deeper than maxJSONDepth. It reads the bytes once, allocating
// only for the keys of objects with more than one (see jsonWalk).
func checkJSON(data []byte) []FieldError {
	if !utf8.Valid(data) {
		return []FieldError{{Loc: []any{"body"}, Msg: "Body is not valid UTF-8", Type: "json_invalid"}}
	}
	if loneSurrogate(data) {
		return []FieldError{{Loc: []any{"body"}, Msg: "Body contains a lone UTF-16 surrogate escape", Type: "json_invalid"}}
	}
	w := jsonWalk{data: data}
	if !w.value() {
		return []FieldError{{Loc: []any{"body", 0}, Msg: "JSON decode error", Type: "json_invalid"}}
	}
	if w.skipSpace(); w.i < len(data) {
		w.errs = append(w.errs, FieldError{Loc: []any{"body"}, Msg: "Extra data after the JSON object", Type: "json_invalid"})
	}
	return w.errs
}

// loneSurrogate reports a \uD800-\uDFFF escape that is not half of a pair.
func loneSurrogate(data []byte) bool {
	hex4 := func(i int) (rune, bool) {
		if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
			return 0, false
		}
		var r rune
		for _, c := range data[i+2 : i+6] {
			switch {
			case '0' <= c && c <= '9':
				r = r<<4 | rune(c-'0')
			case 'a' <= c && c <= 'f':
				r = r<<4 | rune(c-'a'+10)
			case 'A' <= c && c <= 'F':
				r = r<<4 | rune(c-'A'+10)
			default:
				return 0, false
			}
		}
		return r, true
	}
	for i := 0; i < len(data); i++ {
		if data[i] != '\\' {
			continue
		}
		r, ok := hex4(i)
		if !ok {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		switch {
		case 0xD800 <= r && r <= 0xDBFF:
			lo, ok := hex4(i + 6)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 11
		case 0xDC00 <= r && r <= 0xDFFF:
			return true
		default:
			i += 5
		}
	}
	return false
}
