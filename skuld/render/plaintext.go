package render

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
)

// PlainText is the text/plain part of a message sent with HTML and no body:
// what a reader of the HTML reads, without the markup. Mail with an HTML
// part alone reads badly in text clients and screen readers and scores
// worse with spam filters, and the stored text is what previews, search and
// the thread view show.
//
// Scripts, styles, titles and templates are dropped; blocks become lines
// (paragraphs and headings a blank line apart), list items start with "- "
// or their number, a link reads "text (url)" when the URL says more than
// its text (http, https and mailto URLs only), an image reads as its alt
// text. Whitespace collapses as a browser collapses it, except in <pre>.
// Control characters and invisible spacers are dropped, so the result is
// plain text and nothing else. It is never longer than its source, so a
// send's size is bounded before the text is derived: every separator
// written stands for a longer tag, and a list item's marker is written
// only before text of its own. What a degenerate source (thousands of
// one-letter items in deep lists) would add beyond that is not written:
// the writer stops at the source's length, and so does the work.
func PlainText(src string) string {
	w := &textWriter{limit: len(src)}
	z := html.NewTokenizer(strings.NewReader(src))
	for {
		tt := z.Next()
		if w.full {
			tt = html.ErrorToken // the text is as long as it may be: stop reading
		}
		switch tt {
		case html.ErrorToken: // io.EOF: the tokenizer reads any input to its end
			out := w.b.String()
			if len(out) > len(src) {
				out = strings.ToValidUTF8(out[:len(src)], "")
			}
			return out
		case html.TextToken:
			if w.skip == 0 {
				w.text(string(z.Text()))
			}
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			var attrs map[string]string
			if hasAttr {
				attrs = tagAttrs(z)
			}
			w.start(string(name), attrs, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			w.end(string(name))
		}
	}
}

// tagAttrs reads the attributes PlainText uses.
func tagAttrs(z *html.Tokenizer) map[string]string {
	attrs := map[string]string{}
	for {
		k, v, more := z.TagAttr()
		if key := string(k); key == "href" || key == "alt" {
			attrs[key] = string(v)
		}
		if !more {
			return attrs
		}
	}
}

// textWriter writes text with pending separators: a space or line breaks
// are written only before the next visible character, so that runs of
// markup collapse into one separator and nothing trails or leads.
type textWriter struct {
	b       strings.Builder
	breaks  int    // line breaks due before the next character (at most 2)
	space   bool   // a space is due before the next character
	skip    int    // inside elements whose text is not shown
	pre     int    // inside <pre>
	marker  string // a list item's "- " or "3. ", due before its first character
	lists   []list
	link    *link
	written bool
	limit   int  // the most bytes worth writing: the source's length
	full    bool // limit reached: nothing more is written
}

type list struct {
	ordered bool
	n       int
}

type link struct {
	href  string
	start int // where its text begins in b, after the separators; -1 before
}

// blocks are the elements that begin and end on a line of their own: 2 is
// a paragraph (a blank line apart), 1 a line.
var blocks = map[string]int{
	"p": 2, "h1": 2, "h2": 2, "h3": 2, "h4": 2, "h5": 2, "h6": 2, "blockquote": 2, "pre": 2,
	"table": 2, "dl": 2, "figure": 2, "address": 2, "fieldset": 2, "hr": 2,
	"div": 1, "section": 1, "article": 1, "header": 1, "footer": 1, "nav": 1, "aside": 1, "main": 1,
	"tr": 1, "li": 1, "dt": 1, "dd": 1, "caption": 1, "figcaption": 1, "center": 1, "details": 1,
	"summary": 1, "form": 1, "body": 1, "html": 1,
}

// hidden are the elements whose text a reader never sees.
var hidden = map[string]bool{"script": true, "style": true, "title": true, "template": true}

func (w *textWriter) start(name string, attrs map[string]string, selfClosing bool) {
	if hidden[name] {
		if !selfClosing {
			w.skip++
		}
		return
	}
	if w.skip > 0 {
		return
	}
	switch name {
	case "br":
		w.breaks = min(w.breaks+1, 2)
		w.space = false
		return
	case "ul", "ol":
		w.block(1 + boolInt(len(w.lists) == 0))
		w.lists = append(w.lists, list{ordered: name == "ol"})
		return
	case "li":
		w.block(1)
		w.marker = w.itemMarker()
		return
	case "img":
		if alt := strings.TrimSpace(attrs["alt"]); alt != "" {
			w.text(alt)
		}
		return
	case "a":
		w.endLink()
		if href := linkTarget(attrs["href"]); href != "" {
			w.link = &link{href: href, start: -1}
		}
		return
	case "pre":
		w.pre++
	case "td", "th":
		w.space = w.written && w.breaks == 0
	}
	if n := blocks[name]; n > 0 {
		w.block(n)
	}
}

func (w *textWriter) end(name string) {
	if hidden[name] {
		w.skip = max(w.skip-1, 0)
		return
	}
	if w.skip > 0 {
		return
	}
	switch name {
	case "ul", "ol":
		if len(w.lists) > 0 {
			w.lists = w.lists[:len(w.lists)-1]
		}
		w.block(1 + boolInt(len(w.lists) == 0))
		return
	case "a":
		w.endLink()
		return
	case "pre":
		w.pre = max(w.pre-1, 0)
	case "td", "th":
		w.space = w.written && w.breaks == 0
	}
	if n := blocks[name]; n > 0 {
		w.block(n)
	}
}

// block asks for n line breaks before what follows.
func (w *textWriter) block(n int) {
	w.breaks = max(w.breaks, n)
	w.space = false
}

// maxIndent bounds the indentation of nested lists, which would otherwise
// grow with the square of the nesting.
const maxIndent = 4

// itemMarker is a list item's "- " or "3. ", indented by its depth.
func (w *textWriter) itemMarker() string {
	m := "- "
	if l := len(w.lists); l > 0 && w.lists[l-1].ordered {
		w.lists[l-1].n++
		m = strconv.Itoa(w.lists[l-1].n) + ". "
	}
	return strings.Repeat("  ", min(max(len(w.lists)-1, 0), maxIndent)) + m
}

// endLink follows a link's text with its URL, unless the text already is
// the URL (or the address, for mailto).
func (w *textWriter) endLink() {
	l := w.link
	if l == nil {
		return
	}
	w.link = nil
	text := ""
	if l.start >= 0 {
		text = w.b.String()[l.start:]
	}
	shown := strings.TrimPrefix(l.href, "mailto:")
	switch {
	case text == "":
		w.text(shown)
	case text != shown && text != l.href:
		w.text(" (" + shown + ")")
	}
}

// linkTarget is a link's URL if a reader of plain text can use it: an
// absolute http, https or mailto URL without spaces or controls, of a
// sane length. Anything else (javascript:, data:, relative paths) is
// dropped.
func linkTarget(href string) string {
	href = strings.TrimSpace(href)
	lower := strings.ToLower(href)
	if !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") &&
		!strings.HasPrefix(lower, "mailto:") {
		return ""
	}
	if len(href) > 2048 || strings.ContainsFunc(href, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		return ""
	}
	return href
}

// text writes text as shown: whitespace collapsed (kept in <pre>),
// controls and invisible spacers dropped.
func (w *textWriter) text(s string) {
	for _, r := range s {
		switch {
		case w.full:
			return
		case r == utf8.RuneError || invisible(r):
			continue
		case w.pre > 0 && (r == '\n' || r == '\t'):
			w.flush()
			w.b.WriteRune(r)
		case w.pre > 0 && r == '\r':
			continue
		case unicode.IsSpace(r):
			if w.pre > 0 {
				w.flush()
				w.b.WriteByte(' ')
			} else if w.written && w.breaks == 0 {
				w.space = true
			}
		case unicode.IsControl(r):
			continue
		default:
			w.flush()
			w.b.WriteRune(r)
		}
	}
}

// flush writes the separators, and a list item's marker, due before a
// visible character.
func (w *textWriter) flush() {
	switch {
	case !w.written:
	case w.breaks > 0:
		w.b.WriteString("\n\n"[:w.breaks])
	case w.space:
		w.b.WriteByte(' ')
	}
	w.b.WriteString(w.marker)
	w.breaks, w.space, w.written, w.marker = 0, false, true, ""
	w.full = w.b.Len() >= w.limit
	if w.link != nil && w.link.start < 0 {
		w.link.start = w.b.Len()
	}
}

// invisible are the characters mail templates use as invisible spacers
// (soft hyphens and zero-width spaces in preheaders): nothing to read.
func invisible(r rune) bool {
	switch r {
	case '\u00ad', '\u034f', '\u200b', '\ufeff':
		return true
	}
	return false
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
