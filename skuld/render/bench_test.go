package render

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
)

// renderSizes are the body sizes the cost per byte is measured at: a
// curve that is flat across them is linear.
var renderSizes = []int{64 << 10, 256 << 10, 1 << 20}

// renderPattern is a body of about size bytes. A hostile one is built to
// blow up goldmark's quadratic paths; the others are dense Markdown, which
// is rendered, and costs what goldmark's nodes cost.
type renderPattern struct {
	name    string
	body    func(size int) string
	hostile bool
}

func repeat(unit string) func(int) string {
	return func(size int) string { return strings.Repeat(unit, size/len(unit)) }
}

// renderPatterns are plain text and the bodies that blew up goldmark, or
// could: issue 17's three ("*a_", "[a](", deep list nesting), their
// relatives, and, "at budget", the most expensive bodies tooComplex still
// lets through, built by searching for the largest paragraph of a unit it
// accepts.
func renderPatterns() []renderPattern {
	ps := []renderPattern{{name: "plain", body: repeat("hello world, this is plain text. ")}}
	for _, h := range []struct {
		name string
		body func(int) string
	}{
		{"*a_", repeat("*a_")},
		{"[a](", repeat("[a](")},
		{"deep list", func(size int) string {
			var b strings.Builder
			for i := 0; b.Len() < size; i++ {
				b.WriteString(strings.Repeat("  ", i) + "- a\n")
			}
			return b.String()
		}},
		{"_a*", repeat("_a*")},
		{"a_b*", repeat("a_b*")},
		{"**a_", repeat("**a_")},
		{"~a*", repeat("~a*")},
		{"![", repeat("![")},
		{"[a][", repeat("[a][")},
		{`[a](b "`, repeat(`[a](b "`)},
		{"[[[", repeat("[")},
		{`<a b="`, repeat(`<a b="`)},
		{"x<!--", repeat("x<!-- ")},
		{"nested quotes", repeat(">")},
		{"deep quote, lazy lines", func(size int) string {
			return strings.Repeat(">", 1000) + " a\n" + strings.Repeat("b\n", size/2)
		}},
		{"reference definitions", repeat("[a]: b\n")},
		{"reference used often", hostileReferences},
		{"padded table", func(size int) string {
			cols := max(2, int(math.Sqrt(float64(size)/4))) // 512 at 1 MB: 44 million cells padded
			return hostileTable(cols, size/2/len("hello\n"))
		}},
	} {
		ps = append(ps, renderPattern{name: h.name, body: h.body, hostile: true})
	}
	ps = append(ps,
		renderPattern{name: "``a`", body: repeat("``a`")},
		renderPattern{name: "table cells", body: func(size int) string {
			row := "|" + strings.Repeat("a|", 64) + "\n"
			return row + "|" + strings.Repeat("-|", 64) + "\n" + strings.Repeat(row, size/len(row))
		}},
		renderPattern{name: "list items", body: repeat("- [ ] a\n")},
		renderPattern{name: "URLs", body: repeat("www.a.b ")},
	)
	for _, unit := range []string{"*a_", "[a](", `[a](b "`, "``a`", `<a b="`, "**a** ", "www.a.b ", "- [ ] a\n", "> - 1. a\n"} {
		for _, par := range []int{1 << 10, 32 << 10} {
			ps = append(ps, renderPattern{name: fmt.Sprintf("at budget: %q in %d KB paragraphs", unit, par>>10),
				body: atBudget(unit, par)})
		}
	}
	return ps
}

// atBudget builds the densest body of unit, diluted with plain letters, in
// paragraphs of about par bytes, that tooComplex accepts: the most
// expensive body of that kind that is rendered as Markdown.
func atBudget(unit string, par int) func(int) string {
	return func(size int) string {
		body := func(filler int) string {
			u := unit + strings.Repeat("x", filler)
			if strings.HasSuffix(unit, "\n") { // a line: the letters go on it
				u = strings.TrimSuffix(unit, "\n") + strings.Repeat("x", filler) + "\n"
			}
			return fill(strings.Repeat(u, max(1, par/len(u)))+"\n\n", size)
		}
		lo, hi := 0, 1<<14
		for lo < hi { // the fewest letters that pass
			f := (lo + hi) / 2
			if tooComplex(body(f)) {
				lo = f + 1
			} else {
				hi = f
			}
		}
		return body(lo)
	}
}

func fill(par string, size int) string { return strings.Repeat(par, max(1, size/len(par))) }

// BenchmarkRenderCostPerByte measures rendering a body of each pattern at
// each size, per byte: ns/B and B/B (bytes allocated per byte). Compare
// each with plain text of the same size; BENCHMARKS.md has the table.
func BenchmarkRenderCostPerByte(b *testing.B) {
	r := New()
	for _, p := range renderPatterns() {
		for _, size := range renderSizes {
			body := p.body(size)
			b.Run(fmt.Sprintf("%s/%dKB", p.name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(body)))
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				for b.Loop() {
					if _, err := r.HTML(body); err != nil {
						b.Fatal(err)
					}
				}
				runtime.ReadMemStats(&after)
				n := float64(b.N) * float64(len(body))
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/B")
				b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/B")
			})
		}
	}
}

// BenchmarkGoldmarkConstructCost measures what tooComplex's weights stand
// for: goldmark's cost of one construct, in bytes of plain text it costs
// as much as (plainB/construct), each in short paragraphs of 32 so that
// nothing quadratic adds to it. Re-run it when goldmark is upgraded, and
// keep each weight above its measure.
func BenchmarkGoldmarkConstructCost(b *testing.B) {
	r := New()
	const size = 256 << 10
	plain := repeat("hello world, this is plain text. ")(size)
	cost := func(b *testing.B, body string) float64 {
		b.Helper()
		start := b.Elapsed()
		for range 3 {
			if err := r.md.Convert([]byte(body), io.Discard); err != nil {
				b.Fatal(err)
			}
		}
		return float64(b.Elapsed()-start) / 3
	}
	for _, u := range []struct{ name, unit string }{
		{"emphasis run", "*a_ "}, {"link", "[a](b) "}, {"bracket", "[a] "}, {"code span", "`a` "},
		{"autolink", "<a@b.c> "}, {"raw HTML", "<a b "}, {"URL", "www.a.b "}, {"entity", "&amp; "},
		{"escape", `\* `}, {"word", "x "}, {"line", "a\n"}, {"list item", "- a\n"}, {"ordered item", "1. a\n"},
		{"task", "- [ ] a\n"}, {"quote line", "> a\n"},
	} {
		b.Run(u.name, func(b *testing.B) {
			par := strings.Repeat(u.unit, 32)
			body := fill(par+"\n\n", size)
			units := float64(strings.Count(body, u.unit))
			var per float64
			for b.Loop() {
				perPlain := cost(b, plain) / float64(len(plain))
				per = (cost(b, body) - perPlain*float64(len(body))) / units / perPlain
			}
			b.ReportMetric(per, "plainB/construct")
		})
	}
}

// BenchmarkRenderWithoutPrescan renders each hostile pattern at 64 KB with
// the capped writer alone, tooComplex skipped: what the writer bounds by
// itself (output that grows faster than the tree: "reference used often")
// and what only the pre-scan keeps linear (goldmark's quadratic parsing,
// and a padded table's quadratic tree). Compare with
// BenchmarkRenderCostPerByte at 64 KB.
func BenchmarkRenderWithoutPrescan(b *testing.B) {
	r := New()
	for _, p := range renderPatterns() {
		if !p.hostile {
			continue
		}
		body := p.body(64 << 10)
		b.Run(p.name, func(b *testing.B) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			for b.Loop() {
				w := &cappedWriter{limit: MaxSize(len(body))}
				if err := r.md.Convert([]byte(body), w); err != nil && err != errRenderedTooLarge {
					b.Fatal(err)
				}
			}
			runtime.ReadMemStats(&after)
			n := float64(b.N) * float64(len(body))
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/B")
			b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/n, "B/B")
		})
	}
}
