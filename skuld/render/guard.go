package render

import "strings"

// The Markdown renderer (goldmark) takes time linear in the size of
// ordinary Markdown, but some of its algorithms are quadratic, or worse, in
// what a paragraph holds or how deep blocks nest (issue 17: 256 KB of
// "*a_" took 73 s), and every construct costs it far more than text: an
// emphasis, a link or a list item costs what a hundred bytes of text do.
// tooComplex is a pre-scan, linear in the body, that estimates goldmark's
// work; a body whose estimate is over budget is sent with its text,
// escaped, as the HTML part (see Renderer). Ordinary Markdown stays below
// the budget; BenchmarkRenderCostPerByte measures the worst that passes.
//
// The estimate is in units of what a byte of plain text costs goldmark.
// The weights are measured (goldmark v1.8, see BENCHMARKS.md), rounded up:
//
//   - each construct: a run of emphasis delimiters, a link bracket, a
//     link destination, a code span's backticks, a "<", a URL the
//     autolinker finds, an entity, an escape, a space (the autolinker looks
//     at each);
//   - each line, and each list item and blockquote its prefix opens or
//     continues; each table cell;
//   - per paragraph ("region": the lines between blank lines, also split
//     where a bullet item, an ATX heading, or another item of an ordered
//     list starts, since those always start a block of their own, so a
//     region is never smaller than what goldmark parses as one), the
//     quadratic part: goldmark matches each closing delimiter against every
//     opener before it (it keeps no "openers bottom") and each "]" against
//     the open labels, (D+B)² steps for D runs and B brackets; and each
//     opener whose closer may be far or absent (a link destination or title
//     not closed before a space, a reference label, a code span, a "<" not
//     closed on its line) may read to the end of the region, G×L bytes.
//
// Tables' padded cells are charged as cells (see expansion); a body whose
// reference uses could expand past htmlExpansion times its size, plus
// costSlack, is refused too.
//
// The budget is maxCost units a byte, plus costSlack. The nesting of
// blockquotes and lists, whose cost is paid on every line for every open
// container (lazy lines included), is capped at maxNesting levels.
const (
	maxCost   = 12
	costSlack = 64 << 10

	runWeight     = 80  // a run of * _ ~
	bracketWeight = 96  // a [
	destWeight    = 48  // a link destination, after "]("
	tickWeight    = 40  // a run of backticks
	ltWeight      = 384 // a <: autolink, raw HTML
	urlWeight     = 192 // www., ://, @
	ampWeight     = 32  // an entity
	escWeight     = 24  // a backslash escape
	spaceWeight   = 6

	lineWeight  = 48
	itemWeight  = 96
	quoteWeight = 16
	cellWeight  = 64

	stepDivisor = 16 // (D+B)²: a step is about 1 ns, a byte of text 16
	scanDivisor = 6  // G×L: a byte scanned again is about 3 ns

	maxNesting = 32
)

// tooComplex reports whether rendering md as Markdown could cost more than
// maxCost times plain text of its size, or nests blocks deeper than
// maxNesting. It reads md once.
func tooComplex(md string) bool {
	var (
		r     region
		fence fence  // the fenced code block we are in, if open
		prev  string // the line before, in the region
		exp   expansion
		cost  = len(md)
	)
	budget := maxCost*len(md) + costSlack
	for start := 0; start < len(md); {
		end := start
		for end < len(md) && md[end] != '\n' {
			end++
		}
		line := md[start:end]
		start = end + 1

		indent, rest := indentation(line)
		if fence.open {
			if fence.closes(indent, rest) {
				fence.open = false
				continue
			}
			// A line less indented than the fence may end the container
			// the fence is in, and with it the fence: read it as text.
			if rest == "" || indent >= fence.indent {
				continue
			}
			fence.open = false
		}
		if rest == "" { // blank
			cost += r.cost()
			r = region{}
			exp.blank()
			continue
		}
		cells := exp.cells
		exp.line(line)
		cost += cellWeight * (exp.cells - cells)
		items, quotes, depth := nesting(line)
		if depth > maxNesting {
			return true
		}
		cost += lineWeight + itemWeight*items + quoteWeight*quotes
		if indent <= 3 {
			if f, ok := opensFence(indent, rest); ok {
				cost += r.cost()
				r, fence = region{}, f
				continue
			}
			if startsBlock(rest, r.ordered) {
				cost += r.cost()
				r = region{}
			}
		}
		switch {
		case r.table && (indent > 3 || !paragraphText(rest)):
			// Maybe not a row any more: a paragraph again, from here.
			cost += r.cost()
			r = region{}
		case r.table:
			// A row: its cells are inline blocks of their own.
			cost += r.cost()
			r = region{table: true}
		case r.bytes > 0 && !r.delimRow && tableStarts(prev, line):
			cost += r.cost() // the header, and the paragraph before it
			r = region{table: true}
		}
		if r.bytes > 0 && strings.Trim(rest, " \t-|:") == "" {
			r.delimRow = true // a later one cannot start a table (goldmark looks at the first)
		}
		cost += r.add(line, indent <= 3 && isOrderedItem(rest))
		prev = line
		if cost > budget {
			return true
		}
	}
	return cost+r.cost() > budget || exp.references() > htmlExpansion*len(md)+costSlack
}

// region counts what a paragraph's inline parsing may cost.
type region struct {
	bytes    int
	runs     int  // delimiter runs of *, _ and ~, and [ brackets
	scans    int  // openers that may read to the end of the region
	ordered  bool // it began with an ordered list item
	table    bool // it is a table's row (see tableStarts)
	delimRow bool // a line after its first looked like a delimiter row
}

// cost is the quadratic part of the region's inline parsing.
func (r region) cost() int {
	return r.runs*r.runs/stepDivisor + r.scans*r.bytes/scanDivisor
}

// add counts a line of the region and returns what its constructs cost;
// ordered says the line is an ordered list item, which matters for the
// region's first line only.
func (r *region) add(line string, ordered bool) (cost int) {
	if r.bytes == 0 {
		r.ordered = ordered
	}
	r.bytes += len(line) + 1
	var (
		ticks [17]bool // backtick runs of each length still open on this line
		dests int      // "](" and "<" not yet closed by ')' or '>' on this line
		refs  int      // "][" not yet closed by ']' on this line
	)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch c {
		case ')', '>':
			dests = 0 // closed: read to here and no further
		case ' ', '\t', '"', '\'', '<':
			r.scans += dests // a space or quote first: a title, attributes, ...
			dests = 0
		}
		switch c {
		case '\\':
			cost += escWeight
			i++ // an escaped character is literal
		case '*', '_', '~':
			for i+1 < len(line) && line[i+1] == c {
				i++
			}
			r.runs++
			cost += runWeight
		case '[':
			r.runs++
			cost += bracketWeight
		case ']':
			refs = 0
			if i+1 < len(line) && line[i+1] == '(' {
				dests++
				cost += destWeight
				i++
			} else if i+1 < len(line) && line[i+1] == '[' {
				refs++
			}
		case '<':
			dests++
			cost += ltWeight
		case '`':
			n := 1
			for i+1 < len(line) && line[i+1] == '`' {
				i++
				n++
			}
			cost += tickWeight
			switch {
			case n >= len(ticks):
				r.scans++
			case ticks[n]:
				ticks[n] = false // closes the span opened on this line
			default:
				ticks[n] = true
			}
		case '|':
			cost += cellWeight
		case '&':
			cost += ampWeight
		case ' ':
			cost += spaceWeight
		case '@':
			cost += urlWeight
		case 'w', 'W':
			if strings.HasPrefix(line[i:], "www.") || strings.HasPrefix(line[i:], "WWW.") {
				cost += urlWeight
			}
		case ':':
			// A link's own destination is not looked at by the autolinker.
			if dests == 0 && strings.HasPrefix(line[i:], "://") {
				cost += urlWeight
			}
		}
	}
	r.scans += dests + refs // their closers, if any, are on other lines
	for _, open := range ticks {
		if open {
			r.scans++
		}
	}
	return cost
}
