// Package address parses an email address once, at the edge, into the one
// canonical value that the domain filter judges, the SMTP envelope uses and
// the headers show. Nothing downstream reads the raw string again: two
// parsers that disagree are how a blocklist gets walked past
// ("a@evil.com (x)", "g: b@evil.com;", "a@ evil.com").
package address

import (
	"errors"
	"fmt"
	"net/mail"
	"net/netip"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// Address is one mailbox. The zero value is not a valid address; every
// Address returned by Parse is.
type Address struct {
	// Name is the display name, decoded, possibly empty. It never contains
	// an address-like "@", "<" or ">", nor a control character.
	Name string
	// Local is the local part: an ASCII dot-atom (no quoting needed).
	Local string
	// Domain is the domain as DNS sees it: UTS #46-mapped, lower-case,
	// Unicode labels in their ASCII (xn--) form, no trailing dot. For an
	// IP literal it is the bracketed literal, "[192.0.2.1]" or "[IPv6:...]".
	Domain string
	// IP is the address of an IP literal (or of a domain that is an IP
	// address written bare); the zero Addr for a domain name.
	IP netip.Addr
}

// Errors of Parse; each wraps into a *ParseError naming the input.
var (
	ErrControl  = errors.New("contains a control character (CR, LF, NUL, ...)")
	ErrGroup    = errors.New("group syntax is not accepted")
	ErrSyntax   = errors.New("is not one RFC 5322 mailbox")
	ErrLocal    = errors.New("local part must be a plain dot-atom (ASCII letters, digits, #$&'*+-/=?^_`{|}~ and dots; no % or !)")
	ErrDomain   = errors.New("domain cannot be normalised for DNS")
	ErrDot      = errors.New("domain must not end with a dot (of any script: . 。 ． ｡)")
	ErrNumeric  = errors.New("domain ends in a numeric label but is not an IPv4 address")
	ErrName     = errors.New("display name must not contain '@', '<', '>', a look-alike of them, or an encoded word that decodes to one")
	ErrTooLong  = errors.New("is too long")
	ErrIPFormat = errors.New("IP literal is not a valid IPv4 or IPv6 address")
)

// ParseError is an address Parse refused.
type ParseError struct {
	Input string
	Err   error
}

func (e *ParseError) Error() string { return fmt.Sprintf("address %q %v", e.Input, e.Err) }

// Unwrap returns the reason, one of the Err values above.
func (e *ParseError) Unwrap() error { return e.Err }

// maxLen bounds the raw input; RFC 5321 caps a path at 256 octets, and a
// display name does not need kilobytes.
const maxLen = 998

// profile maps a domain as a resolver would (RFC 5891 §5, UTS #46
// non-transitional): fullwidth letters, ideographic full stops, case.
var profile = idna.New(idna.MapForLookup(), idna.BidiRule(), idna.Transitional(false))

// Parse reads raw as exactly one mailbox ("a@x.org", "Ann <a@x.org>") and
// returns its canonical form. It refuses groups, lists, control characters,
// quoted or non-ASCII local parts, display names that look like addresses,
// and domains that do not survive IDNA mapping. IP literals are accepted
// and marked (IP is valid): whether to send to one is policy, not syntax.
func Parse(raw string) (Address, error) {
	fail := func(err error) (Address, error) { return Address{}, &ParseError{Input: raw, Err: err} }
	if len(raw) > maxLen {
		return fail(ErrTooLong)
	}
	if !utf8.ValidString(raw) || hasControl(raw) {
		return fail(ErrControl)
	}
	if isGroup(raw) {
		return fail(ErrGroup)
	}
	m, err := mail.ParseAddress(raw)
	if err != nil {
		return fail(ErrSyntax)
	}
	if err := CheckName(m.Name); err != nil {
		return fail(err)
	}
	at := strings.LastIndexByte(m.Address, '@')
	if at <= 0 {
		return fail(ErrSyntax)
	}
	local, domain := m.Address[:at], m.Address[at+1:]
	if err := CheckLocal(local); err != nil {
		return fail(err)
	}
	a := Address{Name: strings.TrimSpace(m.Name), Local: local}
	if a.Domain, a.IP, err = normaliseDomain(domain); err != nil {
		return fail(err)
	}
	return a, nil
}

// normaliseDomain returns the DNS form of a domain, or of an IP literal.
func normaliseDomain(d string) (string, netip.Addr, error) {
	if strings.HasPrefix(d, "[") && strings.HasSuffix(d, "]") {
		inner := d[1 : len(d)-1]
		v6, isV6 := strings.CutPrefix(inner, "IPv6:")
		ip, err := netip.ParseAddr(v6)
		if err != nil || ip.Zone() != "" || ip.Is4() == isV6 || ip.Is4In6() {
			return "", netip.Addr{}, ErrIPFormat
		}
		if isV6 {
			return "[IPv6:" + ip.String() + "]", ip, nil
		}
		return "[" + ip.String() + "]", ip, nil
	}
	ascii, err := profile.ToASCII(d)
	if err != nil {
		return "", netip.Addr{}, ErrDomain
	}
	ascii = strings.ToLower(ascii)
	// net/mail refuses "a@x.test." as a syntax error, while the mapping
	// above turns "x.test。" into "x.test.": one rule for every script.
	if strings.HasSuffix(ascii, ".") {
		return "", netip.Addr{}, ErrDot
	}
	if ascii == "" || len(ascii) > 253 {
		return "", netip.Addr{}, ErrDomain
	}
	var last string
	for label := range strings.SplitSeq(ascii, ".") {
		if label == "" || len(label) > 63 {
			return "", netip.Addr{}, ErrDomain
		}
		last = label
	}
	// A domain whose last label starts with a digit is no host name (no
	// top-level domain does), and the resolver reads it as an IPv4
	// address in inet_aton's forms: 127.1, 2130706433, 0x7f.1, 0177.0.0.1.
	// It is an IP literal in disguise, judged as one; the forms no
	// resolver reads as an address go nowhere and are refused.
	if last[0] >= '0' && last[0] <= '9' {
		ip, ok := inetAton(ascii)
		if !ok {
			return "", netip.Addr{}, ErrNumeric
		}
		return "[" + ip.String() + "]", ip, nil
	}
	return ascii, netip.Addr{}, nil
}

// AddrSpec is local@domain, the form the SMTP envelope uses.
func (a Address) AddrSpec() string { return a.Local + "@" + a.Domain }

// Key identifies the mailbox for de-duplication: the addr-spec, lower-cased.
// (Local parts are case-sensitive in theory; no mailbox provider treats them so.)
func (a Address) Key() string { return strings.ToLower(a.AddrSpec()) }

// IsIPLiteral reports whether the domain is an IP address.
func (a Address) IsIPLiteral() bool { return a.IP.IsValid() }

// Mail returns the address as net/mail writes it into a header.
func (a Address) Mail() *mail.Address { return &mail.Address{Name: a.Name, Address: a.AddrSpec()} }

// String is the header form: "Ann <a@x.org>", or "a@x.org" without a name.
// Non-ASCII names are RFC 2047-encoded.
func (a Address) String() string {
	if a.Name == "" {
		return a.AddrSpec()
	}
	return a.Mail().String()
}

// isGroup reports an unquoted ':' or ';' outside comments and domain
// literals: in a mailbox those appear only in group syntax ("g: a@x;"),
// which net/mail would silently unwrap to its first member.
func isGroup(s string) bool {
	depth, inQuote, inLiteral := 0, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (inQuote || depth > 0):
			i++
		case inQuote:
			inQuote = c != '"'
		case depth > 0:
			if c == '(' {
				depth++
			} else if c == ')' {
				depth--
			}
		case inLiteral:
			inLiteral = c != ']'
		case c == '"':
			inQuote = true
		case c == '(':
			depth = 1
		case c == '[':
			inLiteral = true
		case c == ':' || c == ';':
			return true
		}
	}
	return false
}

// CheckLocal reports whether local can be the local part of an address we
// send to or from: an RFC 5322 dot-atom of ASCII atext (no quoting, no
// leading, trailing or doubled dots) of at most 64 octets, without '%' and
// '!'. Those two route mail elsewhere on relays that still honour the
// percent hack ("a%evil.com@relay") or bang paths ("evil.com!a@relay"),
// while the filter judges the domain after the '@'.
func CheckLocal(local string) error {
	if !isDotAtom(local) || len(local) > 64 {
		return ErrLocal
	}
	return nil
}

// isDotAtom reports a dot-atom of ASCII atext minus '%' and '!'.
func isDotAtom(s string) bool {
	if s == "" || s[0] == '.' || s[len(s)-1] == '.' || strings.Contains(s, "..") {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("#$&'*+-/=?^_`{|}~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

// MustParse is Parse for addresses known to be valid (tests, constants);
// it panics on an error.
func MustParse(raw string) Address {
	a, err := Parse(raw)
	if err != nil {
		panic(err)
	}
	return a
}

// MustParseList parses each raw address with MustParse.
func MustParseList(raw ...string) []Address {
	out := make([]Address, len(raw))
	for i, s := range raw {
		out[i] = MustParse(s)
	}
	return out
}
