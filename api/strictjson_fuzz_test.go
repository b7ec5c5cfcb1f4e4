package api

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// FuzzStrictJSON checks the request decoder against its memory bound:
// whatever the body, decoding it allocates at most maxAllocPerByte bytes
// per byte of body (plus a constant for the decoder itself and whatever
// else the fuzzing process allocates meanwhile), never fails with a 5xx
// error, and what it accepts is no deeper than maxJSONDepth.
func FuzzStrictJSON(f *testing.F) {
	for _, data := range hostileJSON(2 << 10) {
		f.Add(data)
	}
	for _, s := range []string{
		`{}`, `{"a":1,"a":2}`, `{"a":"\u0000"}`, `{"a":"\ud800"}`, `{"a":[[[[[]]]]]}`, `{"a":"\\"}`,
		`{"a":"[[[["}`, "{\"a\":\"\xff\"}", `{"a":1} x`, `[`, `{"a":{"b":{"c":{"a":1,"a":1}}}}`,
	} {
		f.Add([]byte(s))
	}
	// encoding/json and fmt build their caches on first use; that is not
	// the body's.
	for _, data := range hostileJSON(2 << 10) {
		_, _ = decodeBody(bytes.NewReader(data))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		obj, err := decodeBody(bytes.NewReader(data))
		runtime.ReadMemStats(&after)
		if got, limit := after.TotalAlloc-before.TotalAlloc, uint64(maxAllocPerByte*len(data)+128<<10); got > limit {
			t.Fatalf("decoding %d bytes allocated %d bytes, more than %d", len(data), got, limit)
		}
		var ve *ValidationError
		if err != nil && !errors.As(err, &ve) {
			t.Fatalf("decodeBody(%q) = %v, want a *ValidationError (a 422)", data, err)
		}
		if err == nil && tooDeep(data, maxJSONDepth) {
			t.Fatalf("decodeBody accepted a body nested deeper than %d", maxJSONDepth)
		}
		if err == nil && obj.fields == nil {
			t.Fatalf("decodeBody(%q) accepted no object", data)
		}
	})
}
