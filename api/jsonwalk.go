package api

import (
	"bytes"
	"encoding/json"
)

// jsonWalk reads one JSON value from data, reporting NULs and duplicate
// keys at their location. It walks the bytes itself: encoding/json's
// Decoder.Token costs some 700 ns and 130 bytes per value, which made a
// megabyte of "1," cost most of a CPU-second. The location is one stack of
// frames, pushed and popped as the walk goes down and up, read only into a
// reported problem. A value it cannot read ends the walk (false).
type jsonWalk struct {
	data   []byte
	i      int
	frames []jsonFrame
	errs   []FieldError
}

// jsonFrame is one step of a location: an object's key (raw, as in the
// body) or an array's index.
type jsonFrame struct {
	isKey bool
	key   []byte
	index int
}

func (w *jsonWalk) skipSpace() {
	for w.i < len(w.data) {
		switch w.data[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *jsonWalk) value() bool {
	w.skipSpace()
	if w.i >= len(w.data) {
		return false
	}
	switch c := w.data[w.i]; {
	case c == '{':
		return w.object()
	case c == '[':
		return w.array()
	case c == '"':
		_, nul, ok := w.str()
		if nul {
			w.report(nil, "NUL characters are not allowed", "value_error")
		}
		return ok
	default: // a number, true, false or null: up to the next delimiter
		start := w.i
		for w.i < len(w.data) && !delimiter(w.data[w.i]) {
			w.i++
		}
		return w.i > start
	}
}

func delimiter(c byte) bool {
	switch c {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str reads a string whose opening quote is at w.i: its raw content, and
// whether it holds a NUL (\u0000, the only way valid JSON can).
func (w *jsonWalk) str() (raw []byte, nul, ok bool) {
	start := w.i + 1
	for w.i = start; w.i < len(w.data); w.i++ {
		switch w.data[w.i] {
		case '\\':
			if bytes.HasPrefix(w.data[w.i:], []byte(`\u0000`)) {
				nul = true
			}
			w.i++
		case '"':
			raw = w.data[start:w.i]
			w.i++
			return raw, nul, true
		}
	}
	return nil, nul, false
}

func (w *jsonWalk) object() bool {
	w.i++ // {
	var first []byte
	var seen map[string]bool // made at the second key
	for n := 0; ; n++ {
		w.skipSpace()
		if w.i < len(w.data) && w.data[w.i] == '}' && n == 0 {
			w.i++
			return true
		}
		if w.i >= len(w.data) || w.data[w.i] != '"' {
			return false
		}
		raw, nul, ok := w.str()
		if !ok {
			return false
		}
		key := decodeKey(raw)
		switch {
		case n == 0:
			first = key
		case seen == nil && !bytes.Equal(key, first):
			seen = map[string]bool{string(first): true, string(key): true}
		case (seen == nil && bytes.Equal(key, first)) || seen[string(key)]:
			w.report(key, "Duplicate key "+string(key), "duplicate_key")
		default:
			seen[string(key)] = true
		}
		if nul {
			w.report(nil, "NUL characters are not allowed", "value_error")
		}
		if w.skipSpace(); w.i >= len(w.data) || w.data[w.i] != ':' {
			return false
		}
		w.i++
		w.frames = append(w.frames, jsonFrame{isKey: true, key: key})
		ok = w.value()
		w.frames = w.frames[:len(w.frames)-1]
		if !ok {
			return false
		}
		if more, ok := w.next('}'); !more {
			return ok
		}
	}
}

func (w *jsonWalk) array() bool {
	w.i++ // [
	for n := 0; ; n++ {
		w.skipSpace()
		if w.i < len(w.data) && w.data[w.i] == ']' && n == 0 {
			w.i++
			return true
		}
		w.frames = append(w.frames, jsonFrame{index: n})
		ok := w.value()
		w.frames = w.frames[:len(w.frames)-1]
		if !ok {
			return false
		}
		if more, ok := w.next(']'); !more {
			return ok
		}
	}
}

// next reads what follows an object's or array's element: a ',' (more),
// or its closing byte (done, ok), or anything else (done, not ok).
func (w *jsonWalk) next(closing byte) (more, ok bool) {
	w.skipSpace()
	if w.i < len(w.data) && (w.data[w.i] == ',' || w.data[w.i] == closing) {
		w.i++
		return w.data[w.i-1] == ',', true
	}
	return false, false
}

// decodeKey is a key as the handlers see it: raw when it has no escape
// (no allocation), else decoded ("\u0061" and "a" are the same key).
func decodeKey(raw []byte) []byte {
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw
	}
	var s string
	if err := json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s); err != nil {
		return raw
	}
	return []byte(s)
}

// report records a problem at the current location, plus key if not nil,
// as ["body", "to", 0, ...].
func (w *jsonWalk) report(key []byte, msg, typ string) {
	if len(w.errs) >= maxJSONProblems {
		return
	}
	loc := make([]any, 0, len(w.frames)+2)
	loc = append(loc, "body")
	for _, f := range w.frames {
		if f.isKey {
			loc = append(loc, string(f.key))
		} else {
			loc = append(loc, f.index)
		}
	}
	if key != nil {
		loc = append(loc, string(key))
	}
	w.errs = append(w.errs, FieldError{Loc: loc, Msg: msg, Type: typ})
}
