package render

import (
	"regexp"
	"strings"
	"testing"
)

// The cost FuzzMarkdown allows a render of n bytes: at most
// fuzzAllocPerByte·n + fuzzAllocSlack bytes allocated and
// fuzzMallocsPerByte·n + fuzzMallocSlack allocations. The densest Markdown
// tooComplex accepts allocates up to 68 B/B and 0.46 allocations a byte
// (BENCHMARKS.md, section 11); the slack is what tooComplex's costSlack
// lets a short body cost (64 Ki units, about 6 bytes and 0.04 allocations
// each), with room for sync.Pool, which -race empties at random.
const (
	fuzzAllocPerByte   = 128
	fuzzAllocSlack     = 1 << 20
	fuzzMallocsPerByte = 1
	fuzzMallocSlack    = 8 << 10
)

// FuzzMarkdown checks that rendering never fails or panics, never lets
// raw HTML or a script URL through, and costs what its input's size allows
// (issue 25): the HTML is at most MaxSize, and the bytes and
// allocations per input byte stay under the bounds above, whatever the
// input expands to.
func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{
		"Hi **there**", "<script>alert(1)</script>", "[x](javascript:alert(1))", "<img src=x onerror=alert(1)>",
		"| a | b |\n|---|---|\n| 1 | 2 |", "- [ ] task\n- [x] done", "~~gone~~ https://x.test", "```\n<script>\n```",
		"[x](JaVaScRiPt:alert(1))", "<a href=\"javascript:x\">y</a>", "![i](data:text/html;base64,PHNjcmlwdD4=)",
		// Issue 25's shapes, small: the fuzzer grows them.
		hostileReferences(1 << 10), hostileTable(100, 300),
		"> |a|b|c|d|e|f|g|h|\n> |-|-|-|-|-|-|-|-|\n" + strings.Repeat("> x\n", 50),
		"[a]:\n/" + strings.Repeat("u", 200) + "\n'" + strings.Repeat("t", 200) + "'\n\n" + strings.Repeat("[a][] ![a] [x][a]\n", 20),
	} {
		f.Add(s)
	}
	r := New()
	script := regexp.MustCompile(`(?i)<script|<iframe|<img[^>]*\son\w+=|href="\s*(javascript|vbscript|data):`)
	f.Fuzz(func(t *testing.T, md string) {
		var (
			html string
			err  error
		)
		alloc, mallocs := allocated(func() { html, err = r.HTML(md) })
		if err != nil {
			t.Fatalf("HTML(%.200q): %v", md, err)
		}
		if loc := script.FindStringIndex(html); loc != nil {
			t.Fatalf("HTML(%.200q) = %.200q: active content at %d", md, html, loc[0])
		}
		n := uint64(len(md))
		if len(html) > MaxSize(len(md)) {
			t.Fatalf("HTML(%.200q): %d bytes from %d, over MaxSize", md, len(html), n)
		}
		if alloc > fuzzAllocPerByte*n+fuzzAllocSlack || mallocs > fuzzMallocsPerByte*n+fuzzMallocSlack {
			t.Fatalf("HTML(%.200q): %d bytes in %d allocations for %d bytes of input", md, alloc, mallocs, n)
		}
	})
}
