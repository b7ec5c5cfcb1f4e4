package config

import (
	"fmt"
	"net/netip"
	"strings"
)

// AllowedHostList is what the API's Host check accepts besides loopback
// names and addresses: the items of ALLOWED_HOSTS, lower-cased, and HOST
// when it names one interface (clients reach such a server by that name).
// "*" among them allows any host.
func (c Config) AllowedHostList() []string {
	var hosts []string
	for _, h := range SplitList(c.AllowedHosts) {
		hosts = append(hosts, strings.ToLower(h))
	}
	if h := strings.Trim(strings.TrimSpace(c.Host), "[]"); h != "" {
		if ip, err := netip.ParseAddr(h); err != nil || !ip.IsUnspecified() {
			hosts = append(hosts, strings.ToLower(h))
		}
	}
	return hosts
}

// TrustedProxyPrefixes is TRUSTED_PROXIES parsed; a bare address is a
// prefix of its full length. Items that do not parse are left out (Validate
// reports them).
func (c Config) TrustedProxyPrefixes() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range SplitList(c.TrustedProxies) {
		if p, err := parsePrefix(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	ip, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()), nil
}

func (c Config) validateNetwork() []error {
	var errs []error
	for _, h := range SplitList(c.AllowedHosts) {
		if h != "*" && !validHostPattern(h) {
			errs = append(errs, fmt.Errorf("ALLOWED_HOSTS: %q is not a host name, an IP address or *.domain "+
				"(no scheme, port or path)", RedactURL(h)))
		}
	}
	for _, s := range SplitList(c.TrustedProxies) {
		if _, err := parsePrefix(s); err != nil {
			errs = append(errs, fmt.Errorf("TRUSTED_PROXIES: %q is not an IP address or CIDR such as 10.0.0.0/8", s))
		}
	}
	return errs
}

// validHostPattern accepts what a Host header can carry without its port:
// an IP address (IPv6 with or without brackets), a host name, or a name
// under a domain written "*.example.com" or ".example.com".
func validHostPattern(h string) bool {
	if _, err := netip.ParseAddr(strings.Trim(h, "[]")); err == nil {
		return true
	}
	h = strings.TrimPrefix(strings.TrimPrefix(h, "*"), ".")
	return h != "" && checkHost(h) == nil
}
