package render

import (
	"errors"
	"unicode/utf8"

	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"
)

// Rendering is bounded by construction (issue 25): goldmark writes into a
// cappedWriter that refuses to grow past MaxSize, and every node
// renderer is wrapped so that the walk over the tree stops at the first
// node after the writer refused. A body whose HTML would come out larger
// (a reference link with a long destination used thousands of times: the
// tree is linear, its HTML quadratic) costs at most the cap's bytes of
// rendering, never the whole expansion. goldmark's own node renderers
// ignore write errors, so the writer alone would stop the output but not
// the work: hence the wrapper, which returns the error to the walk.

// errRenderedTooLarge is what the capped writer refuses with, and what the
// walk stops with.
var errRenderedTooLarge = errors.New("render: rendered HTML over its cap")

// cappedWriter is a util.BufWriter (so goldmark writes to it directly,
// with no bufio.Writer of its own in between) that holds at most limit
// bytes. Its buffer never grows past limit either.
type cappedWriter struct {
	buf   []byte
	limit int
	full  bool // a write was refused: the rendering is abandoned
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if !c.room(len(p)) {
		return 0, errRenderedTooLarge
	}
	c.buf = append(c.buf, p...)
	return len(p), nil
}

func (c *cappedWriter) WriteString(s string) (int, error) {
	if !c.room(len(s)) {
		return 0, errRenderedTooLarge
	}
	c.buf = append(c.buf, s...)
	return len(s), nil
}

func (c *cappedWriter) WriteByte(b byte) error {
	if !c.room(1) {
		return errRenderedTooLarge
	}
	c.buf = append(c.buf, b)
	return nil
}

func (c *cappedWriter) WriteRune(r rune) (int, error) {
	n := utf8.RuneLen(r)
	if n < 0 {
		n = utf8.RuneLen(utf8.RuneError) // what AppendRune writes instead
	}
	if !c.room(n) {
		return 0, errRenderedTooLarge
	}
	c.buf = utf8.AppendRune(c.buf, r)
	return n, nil
}

// room makes room for n more bytes, growing the buffer by doubling but
// never past limit, or marks the writer full.
func (c *cappedWriter) room(n int) bool {
	if c.full || n > c.limit-len(c.buf) {
		c.full = true
		return false
	}
	if need := len(c.buf) + n; need > cap(c.buf) {
		grown := make([]byte, len(c.buf), min(max(2*cap(c.buf), need, 512), c.limit))
		copy(grown, c.buf)
		c.buf = grown
	}
	return true
}

// Available is the room left under the cap.
func (c *cappedWriter) Available() int { return c.limit - len(c.buf) }

// Buffered is what has been written.
func (c *cappedWriter) Buffered() int { return len(c.buf) }

// Flush reports whether a write was refused: there is nothing to flush.
func (c *cappedWriter) Flush() error {
	if c.full {
		return errRenderedTooLarge
	}
	return nil
}

var _ util.BufWriter = (*cappedWriter)(nil)

// stoppingRenderer is goldmark's renderer with every node renderer it is
// given (the HTML renderer's and each extension's) wrapped in stopAtCap.
type stoppingRenderer struct {
	renderer.Renderer
}

// AddOptions wraps the node renderers among opts and passes the rest on.
func (s stoppingRenderer) AddOptions(opts ...renderer.Option) {
	cfg := renderer.NewConfig()
	for _, o := range opts {
		o.SetConfig(cfg)
	}
	wrapped := make([]renderer.Option, 0, len(cfg.NodeRenderers)+len(cfg.Options))
	for _, v := range cfg.NodeRenderers {
		nr := stopAtCap{v.Value.(renderer.NodeRenderer)}
		wrapped = append(wrapped, renderer.WithNodeRenderers(util.Prioritized(nr, v.Priority)))
	}
	for name, value := range cfg.Options {
		wrapped = append(wrapped, renderer.WithOption(name, value))
	}
	s.Renderer.AddOptions(wrapped...)
}

// stopAtCap is a node renderer whose functions first check the writer: once
// a cappedWriter has refused a write, the walk stops with
// errRenderedTooLarge instead of rendering the rest of the tree into it.
type stopAtCap struct {
	renderer.NodeRenderer
}

// RegisterFuncs registers the wrapped renderer's functions, each wrapped.
func (s stopAtCap) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	s.NodeRenderer.RegisterFuncs(stopRegisterer{reg})
}

// SetOption passes options (unsafe, XHTML, ...) to the wrapped renderer.
func (s stopAtCap) SetOption(name renderer.OptionName, value any) {
	if so, ok := s.NodeRenderer.(renderer.SetOptioner); ok {
		so.SetOption(name, value)
	}
}

type stopRegisterer struct {
	renderer.NodeRendererFuncRegisterer
}

func (r stopRegisterer) Register(kind ast.NodeKind, f renderer.NodeRendererFunc) {
	if f == nil {
		r.NodeRendererFuncRegisterer.Register(kind, nil)
		return
	}
	r.NodeRendererFuncRegisterer.Register(kind, func(w util.BufWriter, source []byte, n ast.Node, entering bool) (ast.WalkStatus, error) {
		if c, ok := w.(*cappedWriter); ok && c.full {
			return ast.WalkStop, errRenderedTooLarge
		}
		return f(w, source, n, entering)
	})
}
