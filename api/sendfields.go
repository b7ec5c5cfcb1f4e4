package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode"
)

// Bounds of a send's labels and metadata. They are the client's own
// bookkeeping, stored with the message and returned with it (and with
// every search hit); the row must not grow without end because of them.
const (
	maxLabels   = 50
	maxLabelLen = 100
	// maxMetadataSize is in bytes of compact JSON.
	maxMetadataSize = 16 << 10
)

// labels reads a list of at most maxLabels labels of 1..maxLabelLen
// characters without control characters. A label given twice is kept
// once, where it first appears: labels are a set.
func (o object) labels(name string) []string {
	items, idx := o.strItems(name, false, 0)
	if items == nil {
		return nil
	}
	if len(items) > maxLabels {
		o.add(name, fmt.Sprintf("List should have at most %d items after validation, not %d", maxLabels, len(items)), "too_long")
		return nil
	}
	out := make([]string, 0, len(items))
	for j, s := range items {
		at := []any{name, idx[j]}
		o.checkLen(at, s, 1, maxLabelLen)
		if strings.ContainsFunc(s, unicode.IsControl) {
			o.add(at, "Labels must not contain control characters", "value_error")
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// metadata reads a JSON object of at most maxMetadataSize bytes (compact);
// any JSON inside. Numbers are kept as json.Number, digit for digit, so
// that what comes back is what was sent.
func (o object) metadata(name string) map[string]any {
	raw, ok := o.present(name)
	if !ok {
		return nil
	}
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		o.add(name, "Input should be a valid dictionary", "dict_type")
		return nil
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, raw); err != nil { // the body was parsed: cannot happen
		o.add(name, "Input should be a valid dictionary", "dict_type")
		return nil
	}
	if compact.Len() > maxMetadataSize {
		o.add(name, fmt.Sprintf("metadata should be at most %d bytes of JSON, not %d", maxMetadataSize, compact.Len()), "too_long")
		return nil
	}
	m := map[string]any{}
	dec := json.NewDecoder(&compact)
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		o.add(name, "Input should be a valid dictionary", "dict_type")
		return nil
	}
	return m
}
