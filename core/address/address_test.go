package address

import (
	"errors"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in, spec, name, str string
		ip                  bool
	}{
		{"a@example.com", "a@example.com", "", "a@example.com", false},
		{"Ann <a@Example.COM>", "a@example.com", "Ann", `"Ann" <a@example.com>`, false},
		{"a@evil.com (x)", "a@evil.com", "x", `"x" <a@evil.com>`, false},
		{"a@ evil.com", "a@evil.com", "", "a@evil.com", false},
		{"a@ｅｖｉｌ.com", "a@evil.com", "", "a@evil.com", false},
		{"a@EVIL。com", "a@evil.com", "", "a@evil.com", false},
		{"a@bücher.example", "a@xn--bcher-kva.example", "", "a@xn--bcher-kva.example", false},
		{"a@[127.0.0.1]", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@127.0.0.1", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"<a@b.test>", "a@b.test", "", "a@b.test", false},
		{"=?utf-8?q?J=C3=B6rg?= <j@b.test>", "j@b.test", "Jörg", `=?utf-8?q?J=C3=B6rg?= <j@b.test>`, false},
		// Numeric hosts, read as inet_aton reads them, are IP literals.
		{"a@127.1", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@2130706433", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@0x7f000001", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@0177.0.0.1", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@0x7f.0.0.1", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@10.1.258", "a@[10.1.1.2]", "", "a@[10.1.1.2]", true},
		{"a@１２７.１", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@0", "a@[0.0.0.0]", "", "a@[0.0.0.0]", true},
		{"a@0x", "a@[0.0.0.0]", "", "a@[0.0.0.0]", true},
		{"a@4294967295", "a@[255.255.255.255]", "", "a@[255.255.255.255]", true},
		// A number that is not the last label is an ordinary name.
		{"a@123.example", "a@123.example", "", "a@123.example", false},
		{"a@0x7f.example", "a@0x7f.example", "", "a@0x7f.example", false},
		// Names with look-alike-free Unicode, and plain punctuation.
		{"Zoë Support <z@b.test>", "z@b.test", "Zoë Support", `=?utf-8?q?Zo=C3=AB_Support?= <z@b.test>`, false},
		{"=?iso-8859-1?q?Fran=E7ois?= <f@b.test>", "f@b.test", "François", `=?utf-8?q?Fran=C3=A7ois?= <f@b.test>`, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := Parse(tt.in)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if a.AddrSpec() != tt.spec || a.Name != tt.name || a.String() != tt.str || a.IsIPLiteral() != tt.ip {
				t.Errorf("got spec %q name %q str %q ip %v, want %q %q %q %v",
					a.AddrSpec(), a.Name, a.String(), a.IsIPLiteral(), tt.spec, tt.name, tt.str, tt.ip)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	tests := []struct {
		in   string
		want error
	}{
		{"g: b@evil.com;", ErrGroup},
		{"g:;", ErrGroup},
		{"a@evil.com, b@c.test", ErrSyntax},
		{"a@b.test\r\nBcc: x@y.test", ErrControl},
		{"a@b.test\x00", ErrControl},
		{"a\u2028@b.test", ErrControl},
		{"\"a@b\"@evil.com", ErrLocal},
		{"\"a b\"@x.test", ErrLocal},
		{"jörg@x.test", ErrLocal},
		{`"Q" <admin@bank.com> <x@y.test>`, ErrSyntax},
		{`"admin@bank.com" <x@y.test>`, ErrName},
		{"=?utf-8?q?admin=40bank.com?= <x@y.test>", ErrName},
		{"a@x_y.test", ErrDomain},
		{"a@-x.test", ErrDomain},
		{"a@xn--zz.test", ErrDomain},
		{"a@[1.2.3]", ErrSyntax},
		{"not-an-address", ErrSyntax},
		{"", ErrSyntax},
		{"a@b.test\xff", ErrControl},
		{"a@evil.com。", ErrDot},
		{"a@evil.com．", ErrDot},
		{"a@evil.com｡", ErrDot},
		{"a@256.1.1.1", ErrNumeric},
		{"a@1.2.3.4.5", ErrNumeric},
		{"a@09.1", ErrNumeric},
		{"a@0x1g", ErrNumeric},
		{"a@4294967296", ErrNumeric},
		{"a@1.16777216", ErrNumeric},
		{"a%evil.com@ok.test", ErrLocal},
		{"evil.com!a@ok.test", ErrLocal},
		{"Ann <x!a@ok.test>", ErrLocal},
		{`"=?utf-8?q?admin=40bank.com?=" <x@y.test>`, ErrName},
		{`"=?utf-8?b?YWRtaW5AYmFuay5jb20=?=" <x@y.test>`, ErrName},
		{`"=?utf-8?q?a=3D=3Futf-8=3Fq=3F=3D40=3F=3D?=" <x@y.test>`, ErrName},
		{`"=?koi8-r?q?admin=40bank.com?=" <x@y.test>`, ErrName},
		{`"x=?utf-8?q?=3C?=y" <x@y.test>`, ErrName},
		{`"=?utf-8?q?a=0Db?=" <x@y.test>`, ErrControl},
		{"\"admin\uFF20bank.com\" <x@y.test>", ErrName},
		{"\"admin\uFE6Bbank.com\" <x@y.test>", ErrName},
		{"\"\uFF1Ca\uFF1E\" <x@y.test>", ErrName},
		{"\"\uFE64a\uFE65\" <x@y.test>", ErrName},
		{"\"\u2039a\u203A\" <x@y.test>", ErrName},
		{"\"\u1438a\u1433\" <x@y.test>", ErrName},
		{"\"\u3008a\u3009\" <x@y.test>", ErrName},
		{"\"\U0001D236a\" <x@y.test>", ErrName},
		{"\"a\u202Eb\" <x@y.test>", ErrControl},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			a, err := Parse(tt.in)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Parse = %+v, %v; want %v", a, err, tt.want)
			}
		})
	}
}

func TestCheckText(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"Hello, world", true}, {"tab\tinside", true}, {"Grüße 👋", true}, {"שלום", true},
		{"a\vb", false}, {"a\fb", false}, {"a\x1bb", false}, {"a\x7fb", false}, {"a\u0085b", false},
		{"a\u009bb", false}, {"a\u2028b", false}, {"a\u2029b", false}, {"a\u202eb", false},
		{"a\u2066b", false}, {"a\rb", false}, {"a\x00b", false}, {"a\xffb", false},
	} {
		if err := CheckText(tt.in); (err == nil) != tt.ok {
			t.Errorf("CheckText(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}

func TestInetAton(t *testing.T) {
	// The forms glibc's inet_aton documents, and its refusals.
	for _, tt := range []struct{ in, want string }{
		{"127.0.0.1", "127.0.0.1"}, {"127.1", "127.0.0.1"}, {"127.0.1", "127.0.0.1"},
		{"2130706433", "127.0.0.1"}, {"0x7F000001", "127.0.0.1"}, {"017700000001", "127.0.0.1"},
		{"0x7f.1", "127.0.0.1"}, {"0177.0.0.01", "127.0.0.1"}, {"1.0x10203", "1.1.2.3"},
		{"0", "0.0.0.0"}, {"00000000000000000000177.1", "127.0.0.1"},
		{"256.1", ""}, {"1.2.3.256", ""}, {"08", ""}, {"0x", "0.0.0.0"}, {"1..2", ""}, {"", ""},
		{"1.2.3.4.5", ""}, {"0x100000000", ""}, {"1.2.65536", ""}, {"a.b", ""},
	} {
		ip, ok := inetAton(tt.in)
		if got := map[bool]string{true: ip.String(), false: ""}[ok]; got != tt.want {
			t.Errorf("inetAton(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckLocal(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{
		{"support", true}, {"a.b+tag", true}, {"o'brien", true},
		{"a%b", false}, {"a!b", false}, {"ü", false}, {"a b", false}, {".a", false}, {"a..b", false},
		{"", false}, {"ａ", false},
	} {
		if err := CheckLocal(tt.in); (err == nil) != tt.ok {
			t.Errorf("CheckLocal(%q) = %v, want ok %v", tt.in, err, tt.ok)
		}
	}
}
