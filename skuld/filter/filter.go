// Package filter is the outbound domain policy: the allowlist and blocklist
// of OUTBOUND_DOMAIN_ALLOWLIST and OUTBOUND_DOMAIN_BLOCKLIST, compiled once
// and checked against each recipient's canonical domain.
package filter

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	"github.com/nornweave/nornweave/core/address"
	"github.com/nornweave/nornweave/core/config"
)

// Names of the variables the filter is configured from, used in PatternError.
const (
	allowlistVar = "OUTBOUND_DOMAIN_ALLOWLIST"
	blocklistVar = "OUTBOUND_DOMAIN_BLOCKLIST"
)

// A Filter is the outbound recipient policy: a domain matching any
// blocklist pattern is rejected; otherwise, if there is an allowlist, the
// domain must match one of its patterns. Patterns match whole domains,
// case-insensitively; a blocklist pattern also refuses the subdomains of
// what it matches (see Check).
//
// A Filter is immutable after New and safe for concurrent
// use. A nil *Filter, or one with both lists empty, allows everything.
type Filter struct {
	allow, block []domainPattern
}

// domainPattern is one compiled item of a list.
type domainPattern struct {
	source string // as configured, for logs
	re     *regexp.Regexp
	// suffix is an ASCII literal, lower-cased, that every match ends with
	// (partner\.example for (.*\.)?partner\.example), or "". Go's regexp
	// spends about half a microsecond per pattern even on a domain that
	// cannot match; comparing the tail first skips most of them.
	suffix string
}

// match reports whether the pattern matches the whole domain. The suffix
// shortcut is taken only for an ASCII domain: there ASCII case folding is
// exactly what (?i) does, so it never rejects what the regexp would accept.
func (p domainPattern) match(domain string, ascii bool) bool {
	if p.suffix != "" && ascii {
		if len(domain) < len(p.suffix) || !strings.EqualFold(domain[len(domain)-len(p.suffix):], p.suffix) {
			return false
		}
	}
	return p.re.MatchString(domain)
}

// New compiles the comma-separated allowlist and blocklist
// patterns, split as config.SplitPatterns splits them: at commas outside
// groups, classes and counted repetitions, so that ev(il){1,2}\.com is one
// pattern. Items are trimmed and empty items ignored. An invalid pattern,
// or a list whose commas cannot be told apart, returns a *PatternError.
func New(allowlist, blocklist string) (*Filter, error) {
	f := &Filter{}
	var err error
	if f.allow, err = compilePatterns(allowlistVar, allowlist); err != nil {
		return nil, err
	}
	if f.block, err = compilePatterns(blocklistVar, blocklist); err != nil {
		return nil, err
	}
	return f, nil
}

// compilePatterns compiles one comma-separated list; variable names it in
// a PatternError.
func compilePatterns(variable, list string) ([]domainPattern, error) {
	items, err := config.SplitPatterns(list)
	if err != nil {
		return nil, &PatternError{Variable: variable, Err: err}
	}
	var patterns []domainPattern
	for _, item := range items {
		// Parsed bare first so the error quotes what the operator wrote,
		// not our wrapping. The group keeps an alternation inside the
		// pattern under both anchors: "a|b" must mean "^(a|b)$", not "^a|b$".
		tree, err := syntax.Parse(item, syntax.Perl)
		if err != nil {
			return nil, &PatternError{Variable: variable, Pattern: item, Err: err}
		}
		re, err := regexp.Compile(`(?i)^(?:` + item + `)$`)
		if err != nil {
			return nil, &PatternError{Variable: variable, Pattern: item, Err: err}
		}
		patterns = append(patterns, domainPattern{source: item, re: re, suffix: literalSuffix(tree)})
	}
	return patterns, nil
}

// literalSuffix returns the lower-cased ASCII literal that every match of
// re ends with, or "" when there is none it can prove (alternations,
// repetitions, assertions and non-ASCII literals are left to the regexp).
func literalSuffix(re *syntax.Regexp) string {
	switch re.Op {
	case syntax.OpLiteral:
		s := string(re.Rune)
		if !isASCII(s) {
			return ""
		}
		return strings.ToLower(s)
	case syntax.OpCapture:
		return literalSuffix(re.Sub[0])
	case syntax.OpConcat:
		if len(re.Sub) == 0 {
			return ""
		}
		return literalSuffix(re.Sub[len(re.Sub)-1])
	}
	return ""
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// PatternError reports a pattern in OUTBOUND_DOMAIN_ALLOWLIST or
// OUTBOUND_DOMAIN_BLOCKLIST that does not compile, or a list that cannot
// be split into patterns.
type PatternError struct {
	Variable string // the environment variable
	Pattern  string // the offending item, trimmed; "" when the list could not be split
	Err      error  // from regexp.Compile, or config.SplitPatterns (which names the part)
}

// Error names the variable and the pattern, e.g.
// `OUTBOUND_DOMAIN_BLOCKLIST: invalid pattern "[": error parsing regexp: ...`.
func (e *PatternError) Error() string {
	if e.Pattern == "" {
		return fmt.Sprintf("%s: %v", e.Variable, e.Err)
	}
	return fmt.Sprintf("%s: invalid pattern %q: %v", e.Variable, e.Pattern, e.Err)
}

// Unwrap returns the regexp or splitting error.
func (e *PatternError) Unwrap() error { return e.Err }

// Check decides one canonical address (see package core/address): its
// Domain is what the envelope uses, so it is exactly what is judged here.
// domain is that domain; pattern is the blocklist pattern that matched, or
// "" when the address was allowed or is not on the allowlist.
//
// Blocklist patterns match the whole domain or any parent domain of it: a
// pattern for evil.com also refuses mail.evil.com. Allowlist patterns match
// the whole domain only (allowing a parent must not allow every name under
// it unless the pattern says so, e.g. (.*\.)?acme\.com). An IP literal
// ("[192.0.2.1]") is refused unless an allowlist pattern names it, even
// when there is no policy at all.
func (f *Filter) Check(a address.Address) (allowed bool, domain string, pattern string) {
	allowed, pattern = f.decide(a.Domain, a.IsIPLiteral())
	return allowed, a.Domain, pattern
}

// decide applies the policy to a canonical (lower-case ASCII) domain.
func (f *Filter) decide(domain string, ipLiteral bool) (allowed bool, pattern string) {
	if f == nil {
		return !ipLiteral, ""
	}
	ascii := isASCII(domain)
	for _, p := range f.block {
		if p.match(domain, ascii) {
			return false, p.source
		}
		if ipLiteral {
			continue
		}
		for parent := domain; ; {
			dot := strings.IndexByte(parent, '.')
			if dot < 0 {
				break
			}
			parent = parent[dot+1:]
			if p.match(parent, ascii) {
				return false, p.source
			}
		}
	}
	if len(f.allow) == 0 {
		return !ipLiteral, ""
	}
	for _, p := range f.allow {
		if p.match(domain, ascii) {
			return true, ""
		}
	}
	return false, ""
}

// Rejection is a recipient the policy refuses: its canonical domain and the
// blocklist pattern that matched ("" when the domain is not on the
// allowlist, or is an IP literal the allowlist does not name).
type Rejection struct {
	Domain, Pattern string
}

// Rejected returns the refused recipients among addrs (to, cc, bcc, ...) in
// order, or nil when every one is allowed, without allocating then.
func (f *Filter) Rejected(addrs ...[]address.Address) []Rejection {
	var out []Rejection
	for _, list := range addrs {
		for _, a := range list {
			if ok, pattern := f.decide(a.Domain, a.IsIPLiteral()); !ok {
				out = append(out, Rejection{Domain: a.Domain, Pattern: pattern})
			}
		}
	}
	return out
}
