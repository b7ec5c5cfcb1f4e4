package skuld

import (
	"errors"
	"regexp/syntax"
	"runtime/debug"
	"slices"
	"testing"
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
		{"empty lists allow no @", "", "", "bob", true, "bob", ""},
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
		{"domain after the last @", "", `evil\.com`, `"a@good.org"@evil.com`, false, "evil.com", `evil\.com`},
		{"display name form", "", `evil\.com`, "Bob <bob@evil.com>", false, "evil.com", `evil\.com`},
		{"no @ with a policy", "", `evil\.com`, "bob", false, "bob", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := NewDomainFilter(tt.allow, tt.block)
			if err != nil {
				t.Fatalf("NewDomainFilter: %v", err)
			}
			allowed, domain, pattern := f.Check(tt.address)
			if allowed != tt.wantAllowed || domain != tt.wantDomain || pattern != tt.wantPattern {
				t.Errorf("Check(%q): got (%v, %q, %q), want (%v, %q, %q)", tt.address,
					allowed, domain, pattern, tt.wantAllowed, tt.wantDomain, tt.wantPattern)
			}
		})
	}
}

func TestDomainFilterNil(t *testing.T) {
	var f *DomainFilter
	if allowed, _, _ := f.Check("bob@evil.com"); !allowed {
		t.Error("nil filter Check: got rejected, want allowed")
	}
	if got := f.Rejected([]string{"bob@evil.com"}); got != nil {
		t.Errorf("nil filter Rejected: got %v, want nil", got)
	}
}

func TestDomainFilterRejected(t *testing.T) {
	f, err := NewDomainFilter("", `evil\.com,.*\.ru`)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		lists [][]string
		want  []Rejection
	}{
		{"none blocked", [][]string{{"a@good.org"}, {"b@fine.net"}}, nil},
		{"no lists", nil, nil},
		{"in order across to, cc, bcc, lower-cased, with the pattern", [][]string{
			{"a@good.org", "x@mail.ru"},
			{"b@EVIL.com"},
			{"Zed <z@a.ru>"},
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
	f, err := NewDomainFilter(`(.*\.)?acme\.com`, `evil\.com`)
	if err != nil {
		t.Fatal(err)
	}
	to, cc := []string{"a@acme.com", "b@mail.acme.com"}, []string{"c@acme.com"}
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
			f, err := NewDomainFilter(tt.allow, tt.block)
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
		f, err := NewDomainFilter("", src)
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
