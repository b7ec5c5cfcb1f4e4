package notify

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
)

// Guard is what a webhook URL may reach. By default only https, and only
// addresses on the public internet: an application's URL must not make the
// server call into the operator's own network (a database's admin page, a
// cloud's metadata service at 169.254.169.254). The address is checked
// where the connection is made, in the dialer's Control, so a name that
// resolves elsewhere when it is dialled than when it was checked (DNS
// rebinding) is refused all the same.
type Guard struct {
	// AllowHTTP accepts http:// URLs (WEBHOOK_ALLOW_HTTP): development,
	// and the tests on loopback.
	AllowHTTP bool
	// AllowPrivate accepts loopback, private, link-local, multicast and
	// unspecified addresses (WEBHOOK_ALLOW_PRIVATE_TARGETS).
	AllowPrivate bool
}

// ErrForbiddenTarget is a URL or address the Guard refuses.
var ErrForbiddenTarget = errors.New("webhook target not allowed")

// Resolver looks a host's addresses up (net.DefaultResolver does).
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// CheckURL refuses, with an error wrapping ErrForbiddenTarget that says
// why, a URL that is not absolute https (or http under AllowHTTP), has
// user information, or names a host any of whose addresses the Guard
// refuses. It is the check of an endpoint when it is registered; each
// connection is checked again (Control).
func (g Guard) CheckURL(ctx context.Context, raw string, r Resolver) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrForbiddenTarget, raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && g.AllowHTTP:
	default:
		return fmt.Errorf("%w: the URL must be https (WEBHOOK_ALLOW_HTTP=true allows http)", ErrForbiddenTarget)
	}
	if u.User != nil {
		return fmt.Errorf("%w: the URL must not carry a user or password", ErrForbiddenTarget)
	}
	host := u.Hostname()
	addrs := []netip.Addr{}
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, ip)
	} else {
		if addrs, err = r.LookupNetIP(ctx, "ip", host); err != nil {
			return fmt.Errorf("%w: %s does not resolve: %v", ErrForbiddenTarget, host, err)
		}
	}
	for _, a := range addrs {
		if err := g.check(a); err != nil {
			return fmt.Errorf("%w (%s)", err, host)
		}
	}
	return nil
}

// check refuses an address outside the public internet, unless
// AllowPrivate.
func (g Guard) check(a netip.Addr) error {
	a = a.Unmap() // ::ffff:127.0.0.1 is 127.0.0.1
	if g.AllowPrivate {
		return nil
	}
	var kind string
	switch {
	case a.IsLoopback():
		kind = "loopback"
	case a.IsPrivate(), sharedCGNAT.Contains(a):
		kind = "private"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		kind = "link-local"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		kind = "multicast"
	case a.IsUnspecified(), !a.IsValid():
		kind = "unspecified"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is a %s address (WEBHOOK_ALLOW_PRIVATE_TARGETS=true allows it)", ErrForbiddenTarget, a, kind)
}

// sharedCGNAT is RFC 6598's shared address space, a carrier's network:
// not the internet either, though IsPrivate does not say so.
var sharedCGNAT = netip.MustParsePrefix("100.64.0.0/10")

// control is the dialer's Control: it runs for every address a connection
// is attempted to, after resolution and before the connect.
func (g Guard) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %s", ErrForbiddenTarget, address)
	}
	return g.check(ap.Addr())
}

// dialer is a net.Dialer whose every connection passes the Guard.
func (g Guard) dialer() *net.Dialer {
	return &net.Dialer{Control: g.control}
}
