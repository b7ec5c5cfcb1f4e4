// Package render turns a message's Markdown body into its HTML part and an
// HTML part into its text part, at a cost bounded by the input's size:
// Markdown that would expand faster than it grows is sent as escaped text,
// and every rendering writes into a buffer that refuses to grow past
// MaxSize. Pure functions: nothing here reads a database or the network.
package render

import (
	"context"
	"errors"
	"fmt"
	"html"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	ghtml "github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/util"
)

// Renderer turns a Markdown body into the text/html part. Raw HTML in the
// Markdown is dropped (goldmark's default), so an agent cannot smuggle script
// or tracking markup into the HTML through the Markdown body; a caller that
// wants its own HTML passes it explicitly.
//
// Rendering takes time and memory linear in the body whatever it holds: a
// body whose paragraphs would make goldmark's quadratic paths expensive,
// that nests blocks too deep, or whose tables or reference links expand
// faster than it grows (see tooComplex and expansion), is sent as its text,
// escaped, in a <pre> that wraps lines; so is a body whose rendering
// reaches MaxSize, where the rendering stops (see cappedWriter).
// The text/plain part is the body either way.
type Renderer struct {
	md goldmark.Markdown
}

// New returns a Renderer for GitHub-flavoured Markdown (tables,
// strikethrough, autolinks, task lists). It is safe for concurrent use.
func New() *Renderer {
	// goldmark's default renderer, its node renderers (and those GFM adds)
	// wrapped so that rendering stops at the cap: see stoppingRenderer.
	r := stoppingRenderer{renderer.NewRenderer()}
	r.AddOptions(renderer.WithNodeRenderers(util.Prioritized(ghtml.NewRenderer(), 1000)))
	return &Renderer{md: goldmark.New(goldmark.WithRenderer(r), goldmark.WithExtensions(extension.GFM))}
}

// htmlExpansion bounds the rendered HTML: at most this many bytes per byte
// of Markdown, plus htmlSlack. Ordinary Markdown comes out at 1 to 3 times
// its size; the plain-text fallback at most 6 (a '"' is "&#34;"), plus its
// wrapper.
const (
	htmlExpansion = 8
	htmlSlack     = 256
)

// MaxSize is the most bytes Render returns for a body of n bytes:
// what the HTML part can add to a message's size, known before rendering
// (for a throttle lease, say).
func MaxSize(n int) int { return htmlExpansion*n + htmlSlack }

// Render renders markdown to an HTML fragment, or returns ctx's error if
// ctx is done first: it checks before the work starts and once it is done,
// so a caller whose client went away does not go on with the result. The
// work itself is bounded (see Renderer): under a second for the largest
// body (BODY_MAX_SIZE_MB), measured.
func (r *Renderer) Render(ctx context.Context, markdown string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	out, err := r.render(markdown)
	if err != nil {
		return "", err
	}
	return out, ctx.Err()
}

// HTML is Render without a context.
func (r *Renderer) HTML(markdown string) (string, error) {
	return r.Render(context.Background(), markdown)
}

func (r *Renderer) render(markdown string) (string, error) {
	if tooComplex(markdown) {
		return plainHTML(markdown), nil
	}
	// Ordinary Markdown comes out at about its size: start there, so the
	// buffer seldom doubles (and never past the cap).
	w := &cappedWriter{limit: MaxSize(len(markdown))}
	w.buf = make([]byte, 0, min(w.limit, len(markdown)+len(markdown)/4+512))
	switch err := r.md.Convert([]byte(markdown), w); {
	case errors.Is(err, errRenderedTooLarge):
		return plainHTML(markdown), nil
	case err != nil:
		return "", fmt.Errorf("render: render markdown: %w", err)
	}
	return string(w.buf), nil
}

// plainHTML is the body as text: escaped, in a <pre> that wraps long lines
// and keeps the reader's font.
func plainHTML(text string) string {
	var b strings.Builder
	b.Grow(len(text) + len(text)/8 + 100)
	b.WriteString(`<pre style="white-space: pre-wrap; font-family: inherit">`)
	b.WriteString(html.EscapeString(text))
	b.WriteString("</pre>\n")
	return b.String()
}
