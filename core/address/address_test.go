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
		{"a@evil.com。", "a@evil.com", "", "a@evil.com", false},
		{"a@bücher.example", "a@xn--bcher-kva.example", "", "a@xn--bcher-kva.example", false},
		{"a@[127.0.0.1]", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"a@127.0.0.1", "a@[127.0.0.1]", "", "a@[127.0.0.1]", true},
		{"<a@b.test>", "a@b.test", "", "a@b.test", false},
		{"=?utf-8?q?J=C3=B6rg?= <j@b.test>", "j@b.test", "Jörg", `=?utf-8?q?J=C3=B6rg?= <j@b.test>`, false},
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
