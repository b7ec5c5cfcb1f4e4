package mcp

import (
	"bytes"
	"encoding/json"
)

// marshalNoEscape is json.Marshal without HTML escaping, as the API writes
// its JSON: Message-IDs and HTML come back as "<...>", not "\u003c...".
func marshalNoEscape(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return string(bytes.TrimRight(b.Bytes(), "\n")), nil
}

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
