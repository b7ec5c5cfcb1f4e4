package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"unicode/utf8"
)

// checkJSON rejects what encoding/json would let through silently: invalid
// UTF-8 (decoded as U+FFFD), lone surrogate escapes (the same), a NUL in any
// string (PostgreSQL refuses it in text, so it was a 500 there and a 201 on
// SQLite), a key given twice (the last would win) and data after the value.
// The body must already be syntactically valid JSON up to its first value.
func checkJSON(data []byte) []FieldError {
	if !utf8.Valid(data) {
		return []FieldError{{Loc: []any{"body"}, Msg: "Body is not valid UTF-8", Type: "json_invalid"}}
	}
	if loneSurrogate(data) {
		return []FieldError{{Loc: []any{"body"}, Msg: "Body contains a lone UTF-16 surrogate escape", Type: "json_invalid"}}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var errs []FieldError
	if err := walk(dec, []any{"body"}, &errs); err != nil {
		return []FieldError{{Loc: []any{"body", 0}, Msg: "JSON decode error", Type: "json_invalid"}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		errs = append(errs, FieldError{Loc: []any{"body"}, Msg: "Extra data after the JSON object", Type: "json_invalid"})
	}
	return errs
}

// walk reads one JSON value from dec, reporting NULs and duplicate keys
// at their location.
func walk(dec *json.Decoder, loc []any, errs *[]FieldError) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	at := func(k any) []any { return append(append([]any{}, loc...), k) }
	switch v := tok.(type) {
	case string:
		if strings.IndexByte(v, 0) >= 0 {
			*errs = append(*errs, FieldError{Loc: loc, Msg: "NUL characters are not allowed", Type: "value_error"})
		}
	case json.Delim:
		switch v {
		case '{':
			seen := map[string]bool{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return err
				}
				k, _ := kt.(string)
				if seen[k] {
					*errs = append(*errs, FieldError{Loc: at(k), Msg: "Duplicate key " + k, Type: "duplicate_key"})
				}
				seen[k] = true
				if strings.IndexByte(k, 0) >= 0 {
					*errs = append(*errs, FieldError{Loc: loc, Msg: "NUL characters are not allowed", Type: "value_error"})
				}
				if err := walk(dec, at(k), errs); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		case '[':
			for i := 0; dec.More(); i++ {
				if err := walk(dec, at(i), errs); err != nil {
					return err
				}
			}
			_, err = dec.Token()
			return err
		}
	}
	return nil
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
