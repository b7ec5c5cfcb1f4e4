package render

import (
	"strings"
	"testing"
)

// tooComplex splits a body into paragraphs only where goldmark certainly
// starts a new inline block; a body built to look split, where goldmark
// sees one long paragraph, must be caught. Each body is 1 MB of lines that
// are cheap alone ("*a_" diluted) and quadratic together.
func TestGuardSeesParagraphsAsGoldmarkDoes(t *testing.T) {
	unit := "*a_" + strings.Repeat("x", 30)
	lines := func(prefix string) string {
		return strings.Repeat(prefix+unit+"\n", (1<<20)/(len(prefix)+len(unit)+1))
	}
	for _, tt := range []struct {
		name     string
		body     string
		fallback bool
	}{
		// One paragraph for goldmark: the quadratic part is counted.
		{"one paragraph", lines(""), true},
		{"ordered items continuing a paragraph", "x\n" + lines("2. "), true},
		{"lines after a fence the list item's end closed", "- a\n\n   ```\n" + lines(""), true},
		{"blockquote after a table", "a|b\n-|-\n" + lines("> "), true},
		{"rows after a reference definition", "[a]: b|c\n|-|-|\n" + lines("|"), true},
		{"rows after a thematic break", "***\n-|\n" + lines("|"), true},
		{"rows after an indented code line", "# h\n    code\n|-|\n" + lines("|"), true},
		{"header in a list item", "- |a|b\n|-|-|-|\n" + lines("|"), true},
		{"a second delimiter row", "a|b|c\n-|-\nd|e|f\n-|-|-\n" + lines("|"), true},
		{"lines with pipes, no delimiter row", lines("|"), true},
		// Blocks of their own for goldmark: each line is cheap.
		{"bullet items", lines("- "), false},
		{"ordered list", "1. a\n" + lines("2. "), false},
		{"headings", lines("# "), false},
		{"table rows", "a|b\n-|-\n" + lines("|"), false},
		{"paragraphs", strings.ReplaceAll(lines(""), "\n", "\n\n"), false},
		{"fenced code", "```\n" + lines("") + "```\n", false},
	} {
		if got := tooComplex(tt.body); got != tt.fallback {
			t.Errorf("%s: tooComplex = %v, want %v", tt.name, got, tt.fallback)
		}
	}
}

func TestTableStarts(t *testing.T) {
	for _, tt := range []struct {
		header, delim string
		want          bool
	}{
		{"a | b", "--- | ---", true},
		{"| a | b |", "|:--|--:|", true},
		{`a \| b | c`, "-|-", true},
		{"a | b", "-|-|-", false}, // goldmark pads the header; not counted on
		{"a | b | c", "-|-", false},
		{"a | b", "---", false}, // a setext underline
		{"# a | b", "-|-", false},
		{"> a | b", "-|-", false},
		{"[a]: b | c", "-|-", false},
		{"1. a | b", "-|-", false},
		{"    a | b", "-|-", false},
		{"a | b", "-|x", false},
		{"a | b", "    -|-", false},
	} {
		if got := tableStarts(tt.header, tt.delim); got != tt.want {
			t.Errorf("tableStarts(%q, %q) = %v, want %v", tt.header, tt.delim, got, tt.want)
		}
	}
}
