//go:build !race

// Under -race, sync.Pool drops what it holds at random, so goldmark's
// pooled buffers are allocated again an unpredictable number of times and
// the byte counts below swing by a third (CI once saw 32.1 B/B at 256 KB
// against 23.9 at 64 KB for one pattern whose benchmark says 7.3 at both).
// make test therefore runs this file in a second, short pass without
// -race.

package render

import (
	"math"
	"runtime"
	"testing"
)

// Memory is deterministic where time is not. Every pattern allocates per
// byte as much at 256 KB as at 64 KB (the curve is flat: memory is linear
// in the body), and the hostile ones (sent as text) at most 10 times what
// plain text does. The others are dense Markdown that is rendered:
// goldmark allocates 100-300 bytes for each node of it, which no plain text
// needs.
func TestRenderMemoryIsLinear(t *testing.T) {
	r := New()
	// The least of three renders: what the body itself costs. One render
	// can count more (anything else running allocates into the same
	// counter), never less.
	perByte := func(body string) float64 {
		least := math.Inf(1)
		for range 3 {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			if _, err := r.HTML(body); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			least = min(least, float64(after.TotalAlloc-before.TotalAlloc)/float64(len(body)))
		}
		return least
	}
	plain := perByte(renderPatterns()[0].body(256 << 10))
	for _, p := range renderPatterns() {
		small, large := perByte(p.body(64<<10)), perByte(p.body(256<<10))
		if large > 1.25*small+1 {
			t.Errorf("%s: %.1f bytes allocated per byte at 256 KB, %.1f at 64 KB: not linear", p.name, large, small)
		}
		if p.hostile && large > 10*plain {
			t.Errorf("%s: %.1f bytes allocated per byte, plain text %.1f: more than 10 times", p.name, large, plain)
		}
	}
}
