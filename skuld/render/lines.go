package render

import "strings"

// indentation returns the columns of leading whitespace (a tab to the next
// multiple of 4) and the rest of the line; rest is "" for a blank line.
func indentation(line string) (int, string) {
	cols := 0
	for i := 0; i < len(line); i++ {
		switch line[i] {
		case ' ':
			cols++
		case '\t':
			cols += 4 - cols%4
		case '\r':
			if i == len(line)-1 {
				return cols, ""
			}
			return cols, line[i:]
		default:
			return cols, line[i:]
		}
	}
	return cols, ""
}

// nesting reads a line's container prefix: the list markers and the '>'
// in it, and a bound on the containers it opens or continues: each marker,
// and a level per two columns of whitespace (a list item's content is
// indented two columns at least).
func nesting(line string) (items, quotes, depth int) {
	cols := 0
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == ' ':
			cols++
			i++
		case c == '\t':
			cols += 4
			i++
		case c == '>':
			quotes++
			i++
		case (c == '-' || c == '+' || c == '*') && i+1 < len(line) && (line[i+1] == ' ' || line[i+1] == '\t'):
			items++
			i++
		case c >= '0' && c <= '9':
			j := i
			for j < len(line) && j-i < 9 && line[j] >= '0' && line[j] <= '9' {
				j++
			}
			if j+1 < len(line) && (line[j] == '.' || line[j] == ')') && (line[j+1] == ' ' || line[j+1] == '\t') {
				items++
				i = j + 1
				continue
			}
			return items, quotes, items + quotes + cols/2
		default:
			return items, quotes, items + quotes + cols/2
		}
	}
	return items, quotes, items + quotes + cols/2
}

// startsBlock reports a line (at most 3 columns indented) that always
// starts a block of its own in CommonMark, never continuing a paragraph: a
// bullet item with content, an ATX heading, or, right after an ordered
// item, the next one (a first ordered item may continue a paragraph unless
// it is "1.", and is not counted on).
func startsBlock(rest string, afterOrdered bool) bool {
	switch {
	case len(rest) >= 3 && (rest[0] == '-' || rest[0] == '+' || rest[0] == '*') && (rest[1] == ' ' || rest[1] == '\t') &&
		strings.TrimSpace(rest[2:]) != "":
		return true
	case rest[0] == '#':
		n := 0
		for n < len(rest) && rest[n] == '#' {
			n++
		}
		return n <= 6 && (n == len(rest) || rest[n] == ' ' || rest[n] == '\t')
	case afterOrdered:
		return isOrderedItem(rest)
	}
	return false
}

func isOrderedItem(rest string) bool {
	j := 0
	for j < len(rest) && j < 9 && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return j > 0 && j+1 < len(rest) && (rest[j] == '.' || rest[j] == ')') && (rest[j+1] == ' ' || rest[j+1] == '\t')
}

// fence is an open fenced code block: its lines are not parsed as Markdown.
type fence struct {
	open   bool
	char   byte
	length int
	indent int
}

// opensFence reports a fence opening line: three backticks or tildes or
// more (a backtick fence's info string has no backtick).
func opensFence(indent int, rest string) (fence, bool) {
	c := rest[0]
	if c != '`' && c != '~' {
		return fence{}, false
	}
	n := 0
	for n < len(rest) && rest[n] == c {
		n++
	}
	if n < 3 || (c == '`' && strings.IndexByte(rest[n:], '`') >= 0) {
		return fence{}, false
	}
	return fence{open: true, char: c, length: n, indent: indent}, true
}

// closes reports the fence's closing line: its character, at least as many,
// indented at most three columns, nothing but spaces after.
func (f fence) closes(indent int, rest string) bool {
	if indent > 3 || rest == "" || rest[0] != f.char {
		return false
	}
	n := 0
	for n < len(rest) && rest[n] == f.char {
		n++
	}
	return n >= f.length && strings.TrimSpace(rest[n:]) == ""
}
