package skuld

import (
	"bytes"
	"fmt"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// Renderer turns a Markdown body into the text/html part. Raw HTML in the
// Markdown is dropped (goldmark's default), so an agent cannot smuggle script
// or tracking markup into the HTML through the Markdown body; a caller that
// wants its own HTML passes it explicitly.
type Renderer struct {
	md goldmark.Markdown
}

// NewRenderer returns a Renderer for GitHub-flavoured Markdown (tables,
// strikethrough, autolinks, task lists). It is safe for concurrent use.
func NewRenderer() *Renderer {
	return &Renderer{md: goldmark.New(goldmark.WithExtensions(extension.GFM))}
}

// HTML renders markdown to an HTML fragment.
func (r *Renderer) HTML(markdown string) (string, error) {
	var buf bytes.Buffer
	if err := r.md.Convert([]byte(markdown), &buf); err != nil {
		return "", fmt.Errorf("skuld: render markdown: %w", err)
	}
	return buf.String(), nil
}
