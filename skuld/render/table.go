package render

import (
	"regexp"
	"strings"
)

// GFM tables: goldmark parses each cell of a row as an inline block of its
// own, so a table's rows do not add up to one paragraph's quadratic cost.
// tableStarts recognises the start of a table only where goldmark
// certainly makes one, so that treating the rows apart never
// underestimates: a delimiter row right after a header line of the same
// paragraph, with as many cells as the delimiter row has columns, in a
// region that began as plain paragraph text (not a link reference
// definition, which goldmark takes out of the paragraph first).

// tableColumn is one column of a delimiter row: dashes, maybe colons.
var tableColumn = regexp.MustCompile(`^[ \t]*:?-+:?[ \t]*$`)

// tableStarts reports whether line, after header in the same region, is a
// table's delimiter row.
func tableStarts(header, line string) bool {
	hIndent, hRest := indentation(header)
	dIndent, dRest := indentation(line)
	if hIndent > 3 || dIndent > 3 || !paragraphText(hRest) || strings.HasPrefix(hRest, "[") {
		return false
	}
	if items, quotes, _ := nesting(header); items+quotes > 0 {
		return false
	}
	// Only what goldmark's delimiter row allows, and a '|' or ':' (so that
	// no "---" setext underline is taken for one).
	if strings.Trim(dRest, " \t-|:") != "" || !strings.ContainsAny(dRest, "|:") {
		return false
	}
	cols := strings.Split(dRest, "|")
	if strings.TrimSpace(cols[0]) == "" {
		cols = cols[1:]
	}
	if len(cols) > 0 && strings.TrimSpace(cols[len(cols)-1]) == "" {
		cols = cols[:len(cols)-1]
	}
	for _, c := range cols {
		if !tableColumn.MatchString(c) {
			return false
		}
	}
	return len(cols) > 0 && headerCells(hRest) == len(cols)
}

// headerCells counts the cells of a header row as goldmark does: without
// one leading and one trailing '|', split at every '|' not escaped.
func headerCells(row string) int {
	row = strings.TrimSpace(row)
	row = strings.TrimPrefix(row, "|")
	if strings.HasSuffix(row, "|") && !strings.HasSuffix(row, `\|`) {
		row = row[:len(row)-1]
	}
	if row == "" {
		return 0
	}
	n := 1
	for i := 0; i < len(row); i++ {
		if row[i] == '|' && (i == 0 || row[i-1] != '\\') {
			n++
		}
	}
	return n
}

// paragraphText reports a line that can only continue a paragraph: it
// starts nothing else (a heading, fence, quote, HTML block, list item,
// thematic break or setext underline). A table row must be such a line;
// at the first that is not, the table may have ended, and what follows
// is counted as a paragraph again.
func paragraphText(rest string) bool {
	if rest == "" || strings.IndexByte("#`~><-+*_=", rest[0]) >= 0 {
		return false
	}
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	return j == 0 || j == len(rest) || (rest[j] != '.' && rest[j] != ')')
}
