package api

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hostileJSON returns bodies of about n bytes that stress the strict-JSON
// checks, by name, with a plain body of the same size to compare with.
func hostileJSON(n int) map[string][]byte {
	rep := func(head, unit, sep, tail string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i := 0; b.Len() < n-len(tail)-len(unit)-len(sep); i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(unit)
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	deep := func(d int) string { return strings.Repeat("[", d) + strings.Repeat("]", d) }
	return map[string][]byte{
		"plain":              []byte(`{"body":"` + strings.Repeat("a", n-11) + `"}`),
		"nested 10k":         []byte(`{"x":` + deep(n/2-4) + `}`),
		"nested at the cap":  rep(`{"x":[`, deep(maxJSONDepth-2), ",", `]}`),
		"numbers":            rep(`{"x":[`, "1", ",", `]}`),
		"empty strings":      rep(`{"x":[`, `""`, ",", `]}`),
		"empty objects":      rep(`{"x":[`, `{}`, ",", `]}`),
		"duplicate keys":     rep(`{"x":{`, `"a":1`, ",", `}}`),
		"duplicates deep":    rep(`{"x":`+strings.Repeat(`{"a":`, 60)+`{`, `"a":1`, ",", `}`+strings.Repeat("}", 60)+`}`),
		"NULs":               rep(`{"x":[`, `"\u0000"`, ",", `]}`),
		"many keys":          rep(`{"x":{`, `"k":0`, ",", `}}`),
		"escaped string":     []byte(`{"body":"` + strings.Repeat(`\u0041`, (n-11)/6) + `"}`),
		"surrogate pairs":    []byte(`{"body":"` + strings.Repeat(`\ud83d\ude00`, (n-11)/12) + `"}`),
		"deep object keys":   rep(`{"x":[`, `{"a":{"b":{"c":{}}}}`, ",", `]}`),
		"unique keys object": uniqueKeys(n),
	}
}

func uniqueKeys(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"x":{`)
	for i := 0; b.Len() < n-16; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k`)
		b.WriteString(strings.Repeat("x", i%7))
		b.WriteString(string(rune('a' + i%26)))
		b.WriteString(`":0`)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// allocated returns the bytes allocated while decodeBody reads data.
func allocated(data []byte) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, _ = decodeBody(bytes.NewReader(data))
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// maxAllocPerByte bounds the memory decoding a body allocates, per byte of
// body, whatever the body: reading it (about twice its size while it
// grows), the raw fields, the keys of objects. A plain body costs about 8
// bytes per byte, the worst shape here about 11; the 10,000-level body of
// issue 17 cost 840 MB for 20 KB, 42,000 bytes per byte.
const maxAllocPerByte = 32

func TestStrictJSONMemoryIsLinear(t *testing.T) {
	for name, data := range hostileJSON(256 << 10) {
		t.Run(name, func(t *testing.T) {
			got := float64(allocated(data)) / float64(len(data))
			t.Logf("%.1f bytes allocated per byte", got)
			if got > maxAllocPerByte {
				t.Errorf("decoding %d bytes allocated %.1f bytes per byte, want at most %d", len(data), got, maxAllocPerByte)
			}
		})
	}
}

func TestStrictJSONDepth(t *testing.T) {
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"x":` + strings.Repeat("[", maxJSONDepth-1) + strings.Repeat("]", maxJSONDepth-1) + `}`, true},
		{`{"x":` + strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth) + `}`, false},
		{`{"x":"` + strings.Repeat("[", 200) + `"}`, true},                                               // brackets in a string
		{`{"x":"\"` + strings.Repeat("{", 200) + `"}`, true},                                             // after an escaped quote
		{`{"x":"\\\\"` + `,"y":` + strings.Repeat("[", 70) + `1` + strings.Repeat("]", 70) + `}`, false}, // after an escaped backslash
	} {
		_, err := decodeBody(strings.NewReader(tt.body))
		deep := err != nil && strings.Contains(err.Error(), "nested deeper")
		if deep == tt.ok {
			t.Errorf("decodeBody(%.60q...) = %v; want refused for depth: %v", tt.body, err, !tt.ok)
		}
	}
}

// checkJSON's problems and where it says they are.
func TestStrictJSONProblems(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"a":1,"a":2}`, `[{[body a] Duplicate key a duplicate_key}]`},
		{`{"a":1,"\u0061":2}`, `[{[body a] Duplicate key a duplicate_key}]`},
		{`{"a":1,"b":2,"c":{"d":1,"d":2},"b":3}`, `[{[body c d] Duplicate key d duplicate_key} {[body b] Duplicate key b duplicate_key}]`},
		{`{"a":[1,"x\u0000"]}`, `[{[body a 1] NUL characters are not allowed value_error}]`},
		{`{"a\u0000":1}`, `[{[body] NUL characters are not allowed value_error}]`},
		{`{"a":"\\u0000"}`, `[]`}, // an escaped backslash, then "u0000"
		{`{"a":{}, "b":[], "c":[{},[]]}  `, `[]`},
		{`{"a":1} {"b":2}`, `[{[body] Extra data after the JSON object json_invalid}]`},
		{`{"a":1}x`, `[{[body] Extra data after the JSON object json_invalid}]`},
	} {
		if got := fmt.Sprint(checkJSON([]byte(tt.body))); got != tt.want {
			t.Errorf("checkJSON(%s) = %s, want %s", tt.body, got, tt.want)
		}
	}
}
