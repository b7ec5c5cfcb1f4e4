package render

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// hostileReferences is issue 25's first body: one link reference
// definition whose destination is half the body, and "[a]" used in short
// paragraphs for the other half, as densely as 055603e's pre-scan let
// through. Rendered, each use repeats the destination: at 150 KB that was
// 1.5 GB and 15 s.
func hostileReferences(size int) string {
	def := "[a]: http://x/" + strings.Repeat("A", size/2) + "\n\n"
	uses := "See [a].\n\n"
	return def + strings.Repeat(uses, max(1, (size-len(def))/len(uses)))
}

// hostileTable is issue 25's second body: a header of cols cells, its
// delimiter row, and rows one-word rows that goldmark pads to cols cells
// each. 1,500 × 4,500 was 6.75 million cells, 9 s and 577 MB from 35 KB.
func hostileTable(cols, rows int) string {
	return "|" + strings.Repeat("a|", cols) + "\n|" + strings.Repeat("-|", cols) + "\n" + strings.Repeat("hello\n", rows)
}

// allocated is what f allocated, in bytes, and its number of allocations.
func allocated(f func()) (bytes, mallocs uint64) {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, after.Mallocs - before.Mallocs
}

// hostileAllocBound is the most a hostile body may allocate to be
// rendered or refused, per byte of body, plus hostileAllocSlack: rendering
// dense Markdown that is accepted allocates up to 68 B/B (BENCHMARKS.md,
// section 11); a refused body, its escaped text and little else.
const (
	hostileAllocBound = 100
	hostileAllocSlack = 1 << 20
)

// Issue 25: bodies whose HTML or tree grows faster than they do are sent
// as their text, escaped, and what deciding that costs is bounded by the
// body's size: on 055603e the reference body (32 KB, 26 MB of HTML)
// allocated 86 MB, the table (7.6 KB, 400,000 padded cells) 92 MB.
func TestRenderExpansionIsBounded(t *testing.T) {
	r := New()
	for _, tc := range []struct{ name, body string }{
		{"reference used 1,600 times", hostileReferences(32 << 10)},
		{"table padded to 400 × 1,000 cells", hostileTable(400, 1000)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out string
			alloc, _ := allocated(func() {
				var err error
				if out, err = r.HTML(tc.body); err != nil {
					t.Fatal(err)
				}
			})
			if out != plainHTML(tc.body) {
				t.Errorf("HTML = %.80q..., want the body as escaped text", out)
			}
			if limit := hostileAllocBound*uint64(len(tc.body)) + hostileAllocSlack; alloc > limit {
				t.Errorf("rendering %d bytes allocated %d bytes, want at most %d", len(tc.body), alloc, limit)
			}
		})
	}
}

// PlainText stops writing at its source's length: lists nested a thousand
// deep, one letter an item, would otherwise write a marker and its indent
// for each letter.
func TestPlainTextStopsAtItsSource(t *testing.T) {
	src := strings.Repeat("<ul><li>a", 1000) + strings.Repeat("<li>b", 20000)
	var out string
	alloc, _ := allocated(func() { out = PlainText(src) })
	if len(out) > len(src) {
		t.Errorf("PlainText: %d bytes from %d", len(out), len(src))
	}
	if limit := 16*uint64(len(src)) + hostileAllocSlack; alloc > limit {
		t.Errorf("PlainText of %d bytes allocated %d, want at most %d", len(src), alloc, limit)
	}
}

// What people send with references is still rendered: a newsletter's 40
// references, each on a line of its own, used 400 times. (Tables whose
// padded rows come out at more than 8 bytes a byte, or that sit in a
// quote, were sent as text on 055603e already: see docs/security.md.)
func TestRenderKeepsOrdinaryReferences(t *testing.T) {
	var refs, defs strings.Builder
	for i := range 200 {
		fmt.Fprintf(&refs, "Item %d: see [the docs][d%d] and [our blog][d%d].\n\n", i, i%40, (i+1)%40)
	}
	for i := range 40 {
		fmt.Fprintf(&defs, "[d%d]: https://example.com/a/fairly/long/path/to/page-%d \"Page %d\"\n", i, i, i)
	}
	body := refs.String() + defs.String()
	out, err := New().HTML(body)
	if err != nil || !strings.Contains(out, `<a href="https://example.com/a/fairly/long/path/to/page-7" title="Page 7">the docs</a>`) {
		t.Errorf("%d bytes of references: %.100q, %v; want them rendered", len(body), out, err)
	}
}
