package render

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestPlainText(t *testing.T) {
	tests := []struct {
		name, html, want string
	}{
		{"paragraphs", "<p>Hello <b>Ann</b>,</p><p>Your order\n   shipped.</p>", "Hello Ann,\n\nYour order shipped."},
		{"document", "<!DOCTYPE html><html><head><title>Invoice</title><style>p{color:red}</style></head>" +
			"<body><h1>Invoice 42</h1><div>Total: 10&nbsp;&euro;</div></body></html>", "Invoice 42\n\nTotal: 10 €"},
		{"line breaks", "one<br>two<br><br>three<br/><br/><br/>four", "one\ntwo\n\nthree\n\nfour"},
		{"unordered list", "<p>Items:</p><ul><li>tea</li><li>milk <i>(fresh)</i></li></ul><p>Thanks</p>",
			"Items:\n\n- tea\n- milk (fresh)\n\nThanks"},
		{"ordered and nested lists", "<ol><li>one<ul><li>a</li></ul></li><li>two</li></ol>",
			"1. one\n  - a\n2. two"},
		{"link with its url", `See <a href="https://acme.test/o/42">your order</a>.`, "See your order (https://acme.test/o/42)."},
		{"link that is its url", `<a href="https://acme.test">https://acme.test</a>`, "https://acme.test"},
		{"mailto", `Write to <a href="mailto:help@acme.test">us</a> or <a href="mailto:help@acme.test">help@acme.test</a>`,
			"Write to us (help@acme.test) or help@acme.test"},
		{"link without text", `<a href="https://acme.test/x"></a>`, "https://acme.test/x"},
		{"links in list items", `<ul><li><a href="https://a.test">https://a.test</a></li><li> <a href="https://b.test">b</a></li></ul>`,
			"- https://a.test\n- b (https://b.test)"},
		{"unsafe and relative links dropped", `<a href="javascript:alert(1)">click</a> <a href="/rel">here</a> ` +
			`<a href="data:text/html,x">data</a>`, "click here data"},
		{"image alt", `<a href="https://acme.test"><img src="logo.png" alt="ACME"></a> <img src="x.gif">`,
			"ACME (https://acme.test)"},
		{"scripts and comments", "<script>alert('x')</script><!-- hidden -->shown<template><p>t</p></template>", "shown"},
		{"table", "<table><tr><th>Item</th><th>Qty</th></tr><tr><td>Tea</td><td>2</td></tr></table>", "Item Qty\nTea 2"},
		{"pre keeps whitespace", "<p>code:</p><pre>a  b\n\tc</pre><p>end</p>", "code:\n\na  b\n\tc\n\nend"},
		{"entities decoded once", "&lt;b&gt; &amp;amp; &quot;q&quot; &#x263A;", `<b> &amp; "q" ☺`},
		{"spacers and controls dropped", "pre\u200bheader\u00ad&zwnj;\x1b[31m red", "preheader\u200c[31m red"},
		{"horizontal rule", "above<hr>below", "above\n\nbelow"},
		{"plain text passes", "just text", "just text"},
		{"unclosed markup", "<p>a<div>b<p>c", "a\nb\n\nc"},
		{"empty list items", "<ul><li></li><li>a</li><li> </li></ul>", "- a"},
		{"deep lists indent at most 4 levels", strings.Repeat("<ul>", 8) + "<li>deep", "        - deep"},
		{"empty", "", ""},
		{"only markup", "<div><span></span></div>", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PlainText(tt.html); got != tt.want {
				t.Errorf("PlainText(%q)\n got %q\nwant %q", tt.html, got, tt.want)
			}
		})
	}
}

// Whatever the input, the output is valid UTF-8 without markup-bearing
// controls, and never longer than the input (the send's size bound).
func FuzzPlainText(f *testing.F) {
	for _, s := range []string{"<p>a</p>", "<hr><hr><hr>", "<ol><li><ol><li>x", "<a href='https://x'>y</a>",
		"<pre>\r\n\x00</pre>", "&#0;&#x1b;", "<td><td><td>", "\xff<br>",
		strings.Repeat("<ol>", 10) + strings.Repeat("<li>x", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := PlainText(s)
		if len(got) > len(s) {
			t.Errorf("PlainText(%q) = %q: longer than its input", s, got)
		}
		if !utf8.ValidString(got) {
			t.Errorf("PlainText(%q) = %q: not UTF-8", s, got)
		}
		if strings.ContainsFunc(got, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }) {
			t.Errorf("PlainText(%q) = %q: has a control character", s, got)
		}
	})
}
