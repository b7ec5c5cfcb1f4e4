package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ordinaryMarkdown is what people and agents send: it must be rendered as
// Markdown, never fall back to text, however long. The project's own
// README and docs/ pages are such Markdown, each alone and all together
// (the 1,500 lines the README was before they were split up).
func ordinaryMarkdown(t *testing.T) map[string]string {
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(pages) == 0 {
		t.Fatal("no docs/*.md: the test reads the wrong directory")
	}
	docs := map[string]string{}
	var all strings.Builder
	for _, page := range append([]string{"../../README.md"}, pages...) {
		md, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		docs[strings.TrimPrefix(page, "../../")] = string(md)
		all.Write(md)
		all.WriteString("\n")
	}
	rep := func(s string, size int) string { return strings.Repeat(s, size/len(s)+1) }
	var links, table strings.Builder
	for i := 0; links.Len() < 100<<10; i++ {
		fmt.Fprintf(&links, "- [Issue %d](https://example.com/issues/%d) — fixed by **ann** in `v1.%d`\n", i, i, i)
	}
	table.WriteString("| Invoice | Status | Amount | Customer |\n|---|---|---:|---|\n")
	for i := 0; table.Len() < 50<<10; i++ {
		fmt.Fprintf(&table, "| 2024-%04d | **paid** | %d.00 EUR | Ann Example, Berlin |\n", i, 100+i*7)
	}
	bodies := map[string]string{
		"README.md and docs/ together": all.String(),
		"prose":                        rep("This is a paragraph with *some emphasis*, a [link](https://example.com/x), `code`, and **bold** words. It goes on for a while, as paragraphs do, with (parentheses) and numbers like 3.14.\n\n", 500<<10),
		"link list":                    links.String(),
		"table":                        table.String(),
		"code block":                   "Here is the code:\n\n```go\n" + rep("\tif x := f(a[i], *p); x < y && z>>2 != `q` { return <-ch }\n", 200<<10) + "```\n",
		"reply chain":                  rep("> > > On Mon, Ann <ann@example.com> wrote:\n> > > > > quoted text of an old reply, deep down the thread\n", 100<<10),
		"numbered":                     rep("1. First step: open the *settings* page\n2. Then press **Save**\n3. Done, see https://example.com/help\n\n", 100<<10),
	}
	for name, md := range docs {
		bodies[name] = md
	}
	return bodies
}

func TestRenderKeepsOrdinaryMarkdown(t *testing.T) {
	for name, md := range ordinaryMarkdown(t) {
		if tooComplex(md) {
			t.Errorf("%s (%d bytes) falls back to text", name, len(md))
		}
	}
	r := New()
	got, err := r.HTML("Hi **Ann**, see [the docs](https://example.com).")
	if err != nil || got != "<p>Hi <strong>Ann</strong>, see <a href=\"https://example.com\">the docs</a>.</p>\n" {
		t.Errorf("HTML = %q, %v", got, err)
	}
}

// The bodies that blew goldmark up are sent as text: escaped, whole.
func TestRenderFallsBackOnHostileMarkdown(t *testing.T) {
	r := New()
	for _, p := range renderPatterns() {
		if !p.hostile {
			continue
		}
		body := p.body(256 << 10)
		if !tooComplex(body) {
			// Linear with a small constant in goldmark: let it render.
			continue
		}
		got, err := r.HTML(body)
		if err != nil || got != plainHTML(body) {
			t.Errorf("%s: not sent as text (%v)", p.name, err)
		}
	}
	for _, name := range []string{"*a_", "[a](", "deep list", "_a*", "a_b*", "**a_", "[a][", "nested quotes",
		"deep quote, lazy lines", "reference definitions", "[[[", `<a b="`} {
		for _, p := range renderPatterns() {
			if p.name == name && !tooComplex(p.body(64<<10)) {
				t.Errorf("%s (64 KB) is rendered as Markdown, want the text", name)
			}
		}
	}
	got := plainHTML(`<script>alert("x")</script> & a`)
	if want := `<pre style="white-space: pre-wrap; font-family: inherit">&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt; &amp; a</pre>` + "\n"; got != want {
		t.Errorf("plainHTML = %q, want %q", got, want)
	}
}

// HTML bounds its output: MaxSize holds for whatever comes in.
func TestRenderOutputIsBounded(t *testing.T) {
	r := New()
	for _, md := range []string{"", "a", strings.Repeat("> \n\n", 1000), strings.Repeat(`"&<>'`, 1000),
		"|" + strings.Repeat(":-:|", 200) + "\n|" + strings.Repeat("-|", 200) + "\n" + strings.Repeat("a|", 200) + "\n",
		strings.Repeat("-\n", 5000), strings.Repeat("#\n", 5000), strings.Repeat("***\n", 3000)} {
		got, err := r.HTML(md)
		if err != nil || len(got) > MaxSize(len(md)) {
			t.Errorf("HTML of %d bytes: %d bytes, %v; MaxSize %d", len(md), len(got), err, MaxSize(len(md)))
		}
	}
}

func TestRenderStopsForADoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := New().Render(ctx, "Hi"); !errors.Is(err, context.Canceled) {
		t.Errorf("Render with a cancelled context = %v, want context.Canceled", err)
	}
}
