package filter

import (
	"errors"
	"regexp/syntax"
	"runtime/debug"
	"slices"
	"testing"

	"github.com/nornweave/nornweave/core/address"
)

func TestDomainFilterCheck(t *testing.T) {
	tests := []struct {
		name        string
		allow       string
		block       string
		address     string
		wantAllowed bool
		wantDomain  string
		wantPattern string
	}{
		{"empty lists allow", "", "", "bob@anything.org", true, "anything.org", ""},
		{"blocked", "", `evil\.com`, "bob@evil.com", false, "evil.com", `evil\.com`},
		{"case-insensitive", "", `evil\.com`, "Bob@EVIL.COM", false, "evil.com", `evil\.com`},
		{"full match, not a suffix", "", `evil\.com`, "bob@notevil.com", true, "notevil.com", ""},
		{"full match, not a prefix", "", `evil\.com`, "bob@evil.com.attacker.net", true, "evil.com.attacker.net", ""},
		{"alternation stays anchored", "", `evil\.com|bad\.org`, "bob@bad.org.example", true, "bad.org.example", ""},
		{"second of several patterns", "", `evil\.com, .*\.ru ,,`, "ivan@mail.ru", false, "mail.ru", `.*\.ru`},
		{"blocklist beats allowlist", `.*`, `evil\.com`, "bob@evil.com", false, "evil.com", `evil\.com`},
		{"allowlist, apex", `(.*\.)?acme\.com`, "", "ann@acme.com", true, "acme.com", ""},
		{"allowlist, subdomain", `(.*\.)?acme\.com`, "", "ann@mail.acme.com", true, "mail.acme.com", ""},
		{"allowlist, lookalike", `(.*\.)?acme\.com`, "", "ann@acme.com.evil.org", false, "acme.com.evil.org", ""},
		{"allowlist, second pattern", `acme\.com,partner\.io`, "", "p@Partner.IO", true, "partner.io", ""},
		{"display name form", "", `evil\.com`, "Bob <bob@evil.com>", false, "evil.com", `evil\.com`},
		{"comment after the address", "", `evil\.com`, "a@evil.com (x)", false, "evil.com", `evil\.com`},
		{"space after the @", "", `evil\.com`, "a@ evil.com", false, "evil.com", `evil\.com`},
		{"fullwidth letters", "", `evil\.com`, "a@ｅｖｉｌ.com", false, "evil.com", `evil\.com`},
		{"ideographic full stop", "", `evil\.com`, "a@evil。com", false, "evil.com", `evil\.com`},
		{"numeric host", "", `evil\.com`, "a@0x7f.1", false, "[127.0.0.1]", ""},
		{"numeric host named by the allowlist", `\[127\.0\.0\.1\]`, "", "a@2130706433", true, "[127.0.0.1]", ""},
		{"blocklist covers subdomains", "", `evil\.com`, "a@mail.EVIL.com", false, "mail.evil.com", `evil\.com`},
		{"blocklist, deep subdomain", "", `evil\.com`, "a@a.b.evil.com", false, "a.b.evil.com", `evil\.com`},
		{"blocklist, unicode pattern in ACE form", "", `xn--bcher-kva\.example`, "a@Bücher.example", false, "xn--bcher-kva.example", `xn--bcher-kva\.example`},
		{"allowlist does not cover subdomains", `acme\.com`, "", "ann@mail.acme.com", false, "mail.acme.com", ""},
		{"IP literal refused without a policy", "", "", "a@[127.0.0.1]", false, "[127.0.0.1]", ""},
		{"bare IP refused without a policy", "", "", "a@127.0.0.1", false, "[127.0.0.1]", ""},
		{"IP literal refused by a domain allowlist", `.*\.com`, "", "a@[127.0.0.1]", false, "[127.0.0.1]", ""},
		{"IP literal named by the allowlist", `\[127\.0\.0\.1\]`, "", "a@[127.0.0.1]", true, "[127.0.0.1]", ""},
		// A counted repetition's comma does not split the pattern: it
		// means what it says.
		{"repetition, once", "", `ev(il){1,2}\.com`, "a@evil.com", false, "evil.com", `ev(il){1,2}\.com`},
		{"repetition, twice", "", `ev(il){1,2}\.com, bad\.org`, "a@evilil.com", false, "evilil.com", `ev(il){1,2}\.com`},
		{"repetition, three times is not it", "", `ev(il){1,2}\.com`, "a@evililil.com", true, "evililil.com", ""},
		{"repetition, subdomain", "", `ev(il){1,2}\.com`, "a@mx.evil.com", false, "mx.evil.com", `ev(il){1,2}\.com`},
		{"class with a comma", "", `[a,b]x\.com, y\.org`, "a@bx.com", false, "bx.com", `[a,b]x\.com`},
		{"group with a comma", `(acme|x,y)\.com`, "", "a@acme.com", true, "acme.com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(tt.allow, tt.block)
			if err != nil {
				t.Fatalf("NewDomainFilter: %v", err)
			}
			allowed, domain, pattern := f.Check(address.MustParse(tt.address))
			if allowed != tt.wantAllowed || domain != tt.wantDomain || pattern != tt.wantPattern {
				t.Errorf("Check(%q): got (%v, %q, %q), want (%v, %q, %q)", tt.address,
					allowed, domain, pattern, tt.wantAllowed, tt.wantDomain, tt.wantPattern)
			}
		})
	}
}

func TestDomainFilterNil(t *testing.T) {
	var f *Filter
	if allowed, _, _ := f.Check(address.MustParse("bob@evil.com")); !allowed {
		t.Error("nil filter Check: got rejected, want allowed")
	}
	if got := f.Rejected(address.MustParseList("bob@evil.com")); got != nil {
		t.Errorf("nil filter Rejected: got %v, want nil", got)
	}
}

func TestDomainFilterRejected(t *testing.T) {
	f, err := New("", `evil\.com,.*\.ru`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		lists [][]address.Address
		want  []Rejection
	}{
		{"none blocked", [][]address.Address{address.MustParseList("a@good.org"), address.MustParseList("b@fine.net")}, nil},
		{"no lists", nil, nil},
		{"in order across to, cc, bcc, lower-cased, with the pattern", [][]address.Address{
			address.MustParseList("a@good.org", "x@mail.ru"),
			address.MustParseList("b@EVIL.com"),
			address.MustParseList("Zed <z@a.ru>"),
		}, []Rejection{{"mail.ru", `.*\.ru`}, {"evil.com", `evil\.com`}, {"a.ru", `.*\.ru`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := f.Rejected(tt.lists...); !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
				t.Errorf("Rejected: got %#v, want %#v", got, tt.want)
			}
		})
	}
}

func TestDomainFilterRejectedAllocs(t *testing.T) {
	f, err := New(`(.*\.)?acme\.com`, `evil\.com`)
	if err != nil {
		t.Fatal(err)
	}
	to, cc := address.MustParseList("a@acme.com", "b@mail.acme.com"), address.MustParseList("c@acme.com")
	var got []Rejection
	n := testing.AllocsPerRun(100, func() { got = f.Rejected(to, cc) })
	if got != nil {
		t.Fatalf("Rejected: got %v, want nil", got)
	}
	// regexp reuses its matchers through a sync.Pool, which the race
	// detector deliberately empties at random; only a normal build can
	// show the zero.
	if raceEnabled() {
		t.Logf("race detector on: %v allocs/op not checked", n)
		return
	}
	if n != 0 {
		t.Errorf("Rejected with nothing blocked: got %v allocs, want 0", n)
	}
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

func TestNewDomainFilterInvalidPattern(t *testing.T) {
	tests := []struct {
		name         string
		allow, block string
		wantVariable string
		wantPattern  string
		wantText     string
	}{
		{"blocklist", "", `evil\.com, [`, "OUTBOUND_DOMAIN_BLOCKLIST", "[",
			"OUTBOUND_DOMAIN_BLOCKLIST: invalid pattern \"[\": error parsing regexp: missing closing ]: `[`"},
		{"allowlist", `acme\.com,(x`, "", "OUTBOUND_DOMAIN_ALLOWLIST", "(x",
			"OUTBOUND_DOMAIN_ALLOWLIST: invalid pattern \"(x\": error parsing regexp: missing closing ): `(x`"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := New(tt.allow, tt.block)
			if f != nil {
				t.Errorf("filter: got %v, want nil", f)
			}
			var pe *PatternError
			if !errors.As(err, &pe) {
				t.Fatalf("error: got %T %v, want *PatternError", err, err)
			}
			if pe.Variable != tt.wantVariable || pe.Pattern != tt.wantPattern {
				t.Errorf("got variable %q pattern %q, want %q and %q", pe.Variable, pe.Pattern, tt.wantVariable, tt.wantPattern)
			}
			if got := err.Error(); got != tt.wantText {
				t.Errorf("Error(): got %q, want %q", got, tt.wantText)
			}
			var se *syntax.Error
			if !errors.As(err, &se) {
				t.Errorf("Unwrap: got %T, want a *syntax.Error inside", errors.Unwrap(err))
			}
		})
	}
}

// A list whose commas cannot be told apart is refused, naming the variable
// and the part: it was split at every comma, and its fragments compiled
// into patterns that blocked nothing of what was meant.
func TestNewDomainFilterAmbiguousList(t *testing.T) {
	_, err := New("", `ok\.com, ev(il{1,2}\.com, bad\.org`)
	var pe *PatternError
	if !errors.As(err, &pe) || pe.Variable != "OUTBOUND_DOMAIN_BLOCKLIST" ||
		err.Error() != `OUTBOUND_DOMAIN_BLOCKLIST: ambiguous pattern "ev(il{1,2}\.com, bad\.org": "(" is never closed, so its commas cannot be told apart` {
		t.Errorf("NewDomainFilter = %v, want an ambiguous-pattern *PatternError naming OUTBOUND_DOMAIN_BLOCKLIST", err)
	}
}

func TestLiteralSuffix(t *testing.T) {
	tests := []struct{ pattern, want string }{
		{`evil\.com`, "evil.com"},
		{`(.*\.)?ACME\.com`, "acme.com"},
		{`mail\.(acme\.com)`, "acme.com"},
		{`.*\.ru`, ".ru"},
		{`evil\.com|bad\.org`, ""},
		{`evil\.com$`, ""},
		{`evil\.co[mn]`, ""},
		{`.*\.рф`, ""},
		{`.*`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.pattern, func(t *testing.T) {
			tree, err := syntax.Parse(tt.pattern, syntax.Perl)
			if err != nil {
				t.Fatal(err)
			}
			if got := literalSuffix(tree); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestDomainPatternShortcut checks that the suffix shortcut never changes a
// decision: for every pattern and domain, match agrees with the regexp alone.
func TestDomainPatternShortcut(t *testing.T) {
	patterns := []string{
		`evil\.com`, `(.*\.)?acme\.com`, `.*\.ru`, `EVIL\.COM`, `x(?-i:Ab)\.org`,
		`(?i)k\.io`, `.*\.рф`, `evil\.com|bad\.org`, `[a-z]+\.example`, `s`,
	}
	domains := []string{
		"evil.com", "EVIL.COM", "notevil.com", "evil.com.attacker.net", "acme.com", "mail.acme.com",
		"acme.com.evil.org", "mail.ru", "MAIL.RU", "ru", "xab.org", "xAb.org", "k.io", "K.IO",
		"\u212a.io", "evil.co\u212a", "пример.рф", "bad.org", "abc.example", "s", "S", "\u017f", "",
	}
	for _, src := range patterns {
		f, err := New("", src)
		if err != nil {
			t.Fatalf("NewDomainFilter(%q): %v", src, err)
		}
		p := f.block[0]
		for _, d := range domains {
			if got, want := p.match(d, isASCII(d)), p.re.MatchString(d); got != want {
				t.Errorf("pattern %q, domain %q: got %v, want %v (the regexp's answer)", src, d, got, want)
			}
		}
	}
}
