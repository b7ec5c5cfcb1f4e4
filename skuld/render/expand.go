package render

import "strings"

// Two constructs make goldmark's output, or its tree, grow faster than the
// body (issue 25), whatever the paragraphs cost to parse:
//
//   - A link reference definition is rendered again at each use: one
//     definition with a 75 KB destination and 25,000 "[a]" in short
//     paragraphs (150 KB) came out at gigabytes. The tree stays linear (the
//     uses share the destination's bytes); the capped writer stops the
//     rendering, and this count refuses such a body before it is parsed.
//   - A GFM table pads every row to the header's cells: a header of 1,500
//     cells over 4,500 one-word rows is 6.75 million cells in the tree
//     from 35 KB. The tree itself is quadratic, so this must be counted
//     before goldmark parses; the capped writer alone would come too late.
//
// expansion counts both, in one pass: a use is any "]" not opening an
// inline link's destination or a definition's, and what a use can expand
// to is bounded by the longest run of lines from one holding "]:" up to
// the next such line or a blank line (a definition, its destination and
// its title never span a blank line; a title may hold a line with "]:" of
// its own, and is then counted in parts, which the capped writer still
// bounds); a table's rows are every non-blank line after a line that
// looks like a delimiter row, each charged the cells goldmark pads it with
// (the delimiter's runs of dashes, less the row's own '|', which tooComplex
// already charges as cells), containers or not. A padded cell costs
// goldmark what 36 to 74 bytes of plain text do (three runs on a loaded
// machine: a million padded cells against 1 MB of text); tooComplex
// charges it cellWeight, 64.
type expansion struct {
	uses   int // "]" that may be a reference's use
	defMax int // bytes of the longest definition seen
	def    int // bytes of the current definition, or 0 outside one
	cols   int // columns of the table whose rows may follow
	cells  int // padding cells goldmark adds to tables' rows
}

// line counts a non-blank line outside fenced code.
func (e *expansion) line(line string) {
	defs := strings.Count(line, "]:")
	if defs > 0 {
		e.endDef()
	}
	if defs > 0 || e.def > 0 {
		e.def += len(line) + 1
	}
	e.uses += strings.Count(line, "]") - defs - strings.Count(line, "](")
	if pipes := strings.Count(line, "|"); e.cols > pipes {
		e.cells += e.cols - pipes // the cells goldmark adds; each '|' is paid for already
	}
	if c := delimiterColumns(line); c > 1 {
		e.cols = c
	}
}

// blank ends a block: a definition cannot continue past it, nor a table.
func (e *expansion) blank() {
	e.endDef()
	e.cols = 0
}

func (e *expansion) endDef() {
	e.defMax = max(e.defMax, e.def)
	e.def = 0
}

// references is what the uses may expand to, in bytes, at most.
func (e *expansion) references() int {
	e.blank()
	return e.uses * e.defMax
}

// delimiterColumns is the number of columns of a line that may be a GFM
// table's delimiter row, after any container prefix ('>', list markers,
// whitespace), or 0: only '-', ':', '|' and whitespace, and a '|'.
func delimiterColumns(line string) int {
	rest := strings.TrimLeft(line, " \t>")
	if strings.Trim(rest, " \t-|:") != "" || !strings.Contains(rest, "|") {
		return 0
	}
	cols := 0
	for i := 0; i < len(rest); i++ {
		if rest[i] == '-' && (i == 0 || rest[i-1] != '-') {
			cols++
		}
	}
	return cols
}
