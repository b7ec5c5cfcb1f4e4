package config

import (
	"slices"
	"strings"
	"testing"
)

func TestSplitPatterns(t *testing.T) {
	for _, tt := range []struct {
		list string
		want []string
	}{
		{``, nil},
		{` , ,`, nil},
		{`evil\.com, bad\.org`, []string{`evil\.com`, `bad\.org`}},
		{`ev(il){1,2}\.com`, []string{`ev(il){1,2}\.com`}},
		{`ev(il){1,2}\.com,x\.org`, []string{`ev(il){1,2}\.com`, `x\.org`}},
		{`a{2,}\.com, b{3}\.com`, []string{`a{2,}\.com`, `b{3}\.com`}},
		{`(a,b|c)\.com`, []string{`(a,b|c)\.com`}},
		{`(?i:x,y)\.com,(?P<n>z)`, []string{`(?i:x,y)\.com`, `(?P<n>z)`}},
		{`[a,b]\.com, c`, []string{`[a,b]\.com`, `c`}},
		{`[],a]\.com`, []string{`[],a]\.com`}},
		{`[^],a]x`, []string{`[^],a]x`}},
		{`[[:alpha:],]+\.com, d`, []string{`[[:alpha:],]+\.com`, `d`}},
		{`[(]x, y`, []string{`[(]x`, `y`}},
		{`a\,b, c`, []string{`a\,b`, `c`}},
		{`\(x, y\)`, []string{`\(x`, `y\)`}},
		{`\Qa,b\E, c`, []string{`\Qa,b\E`, `c`}},
		{`x\{1,2\}`, []string{`x\{1`, `2\}`}},
		{`((a){1,2}(b,c)),d`, []string{`((a){1,2}(b,c))`, `d`}},
		// Unpaired, but no comma follows: not ambiguous; compiling says why.
		{`ok, (bad`, []string{`ok`, `(bad`}},
		{`ok, x}`, []string{`ok`, `x}`}},
	} {
		got, err := SplitPatterns(tt.list)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("SplitPatterns(%q) = %q, %v; want %q", tt.list, got, err, tt.want)
		}
	}
}

func TestSplitPatternsRefusesAmbiguousLists(t *testing.T) {
	for _, tt := range []struct{ list, part, why string }{
		{`ok\.com, ev(il{1,2}\.com, bad\.com`, `ev(il{1,2}\.com, bad\.com`, `"(" is never closed`},
		{`a{1,b\.com`, `a{1,b\.com`, `counted repetition`},
		{`a{,2}`, `a{,2}`, `counted repetition`},
		{`x}, y`, `x}, y`, `closes no repetition`},
		{`x), y`, `x), y`, `closes no group`},
		{`[a,b\.com, c`, `[a,b\.com, c`, `"[" is never closed`},
		{`ok, {x}, y`, `{x}, y`, `counted repetition`},
	} {
		_, err := SplitPatterns(tt.list)
		if err == nil || !strings.Contains(err.Error(), `"`+tt.part+`"`) || !strings.Contains(err.Error(), tt.why) {
			t.Errorf("SplitPatterns(%q) = %v; want an error naming %q and saying %s", tt.list, err, tt.part, tt.why)
		}
	}
}

// Validate reports an ambiguous list at start-up, naming the variable; a
// repetition's comma no longer splits a pattern.
func TestValidateDomainPatternLists(t *testing.T) {
	c := valid()
	c.OutboundDomainBlocklist = `ev(il){1,2}\.com, a{1,b\.com`
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), `OUTBOUND_DOMAIN_BLOCKLIST: ambiguous pattern "a{1,b\.com"`) {
		t.Errorf("Validate() = %v, want OUTBOUND_DOMAIN_BLOCKLIST: ambiguous pattern \"a{1,b\\.com\"", err)
	}
	c.OutboundDomainBlocklist, c.OutboundDomainAllowlist = `ev(il){1,2}\.com`, `x}, y`
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "OUTBOUND_DOMAIN_ALLOWLIST: ambiguous") {
		t.Errorf("Validate() = %v, want OUTBOUND_DOMAIN_ALLOWLIST: ambiguous ...", err)
	}
	c.OutboundDomainAllowlist = ""
	if err := c.Validate(); err != nil {
		t.Errorf("Validate() = %v, want ev(il){1,2}\\.com accepted", err)
	}
}
