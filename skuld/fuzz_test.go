package skuld

import (
	"net/mail"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/store"
)

// FuzzAddressFilter checks the property behind issue 7.1: for any string a
// client can send as a recipient, the domain the filter judged is exactly
// the domain of the address the provider is given for the envelope, and of
// the address the header shows; and nothing under a blocked domain is
// allowed.
func FuzzAddressFilter(f *testing.F) {
	for _, s := range []string{
		"a@evil.com", "a@evil.com (x)", "g: b@evil.com;", "a@ evil.com", "Bob <a@EVIL.com>",
		"a@ｅｖｉｌ.com", "a@evil。com", "a@evil.com。", "a@mail.evil.com", `"a@ok.test"@evil.com`,
		"a@[127.0.0.1]", "a@127.0.0.1", "=?utf-8?q?x?= <a@evil.com>", "a@xn--vil-9oa.com", "a@évil.com",
		"a@evil.com\r\nBcc: b@x", "a@ok.test", "<a@evil.com>", "a@evil.com.", "(c) a@evil.com",
	} {
		f.Add(s)
	}
	filter, err := NewDomainFilter("", `evil\.com`)
	if err != nil {
		f.Fatal(err)
	}
	underEvil := regexp.MustCompile(`(^|\.)evil\.com$`)
	inbox := &store.Inbox{ID: "ib", EmailAddress: "support@acme.test", Name: "Support"}
	f.Fuzz(func(t *testing.T, raw string) {
		a, err := address.Parse(raw)
		if err != nil {
			return
		}
		allowed, judged, _ := filter.Check(a)
		req := SendRequest{To: []address.Address{a}, Cc: []address.Address{a}, Bcc: []address.Address{a}}
		pm := providerMessage(&store.Message{MessageIDHeader: "<m@acme.test>", CreatedAt: time.Now()}, inbox, req)
		for _, list := range [][]address.Address{pm.To, pm.Cc, pm.Bcc} {
			// What go-mail puts in RCPT TO: the address's String without
			// the name, "<addr-spec>".
			ma := list[0].Mail()
			ma.Name = ""
			env := strings.TrimSuffix(strings.TrimPrefix(ma.String(), "<"), ">")
			if env != a.AddrSpec() {
				t.Fatalf("Parse(%q): envelope %q, want the canonical %q", raw, env, a.AddrSpec())
			}
			if envDomain := env[strings.LastIndexByte(env, '@')+1:]; envDomain != judged {
				t.Fatalf("Parse(%q): filter judged %q, envelope uses %q", raw, judged, envDomain)
			}
		}
		// The header form, read back by any RFC 5322 parser, names the same mailbox.
		back, err := mail.ParseAddress(a.String())
		if err != nil || back.Address != a.AddrSpec() {
			t.Fatalf("Parse(%q): header %q reads back as %v, %v; want %q", raw, a.String(), back, err, a.AddrSpec())
		}
		if allowed && underEvil.MatchString(strings.ToLower(judged)) {
			t.Fatalf("Parse(%q) = %q: allowed under a blocked domain", raw, a.AddrSpec())
		}
		if strings.ContainsAny(a.AddrSpec()+a.Name, "\r\n\x00") {
			t.Fatalf("Parse(%q): control character survived in %q", raw, a.String())
		}
	})
}

// The cost FuzzMarkdown allows a render of n bytes: at most
// fuzzAllocPerByte·n + fuzzAllocSlack bytes allocated and
// fuzzMallocsPerByte·n + fuzzMallocSlack allocations. The densest Markdown
// tooComplex accepts allocates up to 68 B/B and 0.46 allocations a byte
// (BENCHMARKS.md, section 11); the slack is what tooComplex's costSlack
// lets a short body cost (64 Ki units, about 6 bytes and 0.04 allocations
// each), with room for sync.Pool, which -race empties at random.
const (
	fuzzAllocPerByte   = 128
	fuzzAllocSlack     = 1 << 20
	fuzzMallocsPerByte = 1
	fuzzMallocSlack    = 8 << 10
)

// FuzzMarkdown checks that rendering never fails or panics, never lets
// raw HTML or a script URL through, and costs what its input's size allows
// (issue 25): the HTML is at most MaxRenderedSize, and the bytes and
// allocations per input byte stay under the bounds above, whatever the
// input expands to.
func FuzzMarkdown(f *testing.F) {
	for _, s := range []string{
		"Hi **there**", "<script>alert(1)</script>", "[x](javascript:alert(1))", "<img src=x onerror=alert(1)>",
		"| a | b |\n|---|---|\n| 1 | 2 |", "- [ ] task\n- [x] done", "~~gone~~ https://x.test", "```\n<script>\n```",
		"[x](JaVaScRiPt:alert(1))", "<a href=\"javascript:x\">y</a>", "![i](data:text/html;base64,PHNjcmlwdD4=)",
		// Issue 25's shapes, small: the fuzzer grows them.
		hostileReferences(1 << 10), hostileTable(100, 300),
		"> |a|b|c|d|e|f|g|h|\n> |-|-|-|-|-|-|-|-|\n" + strings.Repeat("> x\n", 50),
		"[a]:\n/" + strings.Repeat("u", 200) + "\n'" + strings.Repeat("t", 200) + "'\n\n" + strings.Repeat("[a][] ![a] [x][a]\n", 20),
	} {
		f.Add(s)
	}
	r := NewRenderer()
	script := regexp.MustCompile(`(?i)<script|<iframe|<img[^>]*\son\w+=|href="\s*(javascript|vbscript|data):`)
	f.Fuzz(func(t *testing.T, md string) {
		var (
			html string
			err  error
		)
		alloc, mallocs := allocated(func() { html, err = r.HTML(md) })
		if err != nil {
			t.Fatalf("HTML(%.200q): %v", md, err)
		}
		if loc := script.FindStringIndex(html); loc != nil {
			t.Fatalf("HTML(%.200q) = %.200q: active content at %d", md, html, loc[0])
		}
		n := uint64(len(md))
		if len(html) > MaxRenderedSize(len(md)) {
			t.Fatalf("HTML(%.200q): %d bytes from %d, over MaxRenderedSize", md, len(html), n)
		}
		if alloc > fuzzAllocPerByte*n+fuzzAllocSlack || mallocs > fuzzMallocsPerByte*n+fuzzMallocSlack {
			t.Fatalf("HTML(%.200q): %d bytes in %d allocations for %d bytes of input", md, alloc, mallocs, n)
		}
	})
}
