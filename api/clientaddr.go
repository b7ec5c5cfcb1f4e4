package api

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr is the address of the client that made r: the TCP peer,
// unless the peer is one of TrustedProxies. Then it is the nearest address
// the proxies' X-Forwarded-For names that is not itself a trusted proxy
// (read from the right: every proxy appends the peer it saw, and all on
// the left of the first untrusted entry may be the client's own invention),
// or the same from Forwarded's for= when there is no X-Forwarded-For.
// Headers from a peer that is not trusted are never read: any client could
// set them, to spread its failed keys over invented addresses or to lock
// out someone else's.
func (a *API) clientAddr(r *http.Request) netip.Addr {
	peer := parseHop(r.RemoteAddr)
	if !a.trusted(peer) {
		return peer
	}
	hops := forwardedFor(r.Header)
	for i := len(hops) - 1; i >= 0; i-- {
		hop := parseHop(hops[i])
		if !hop.IsValid() {
			break // garbage the proxies did not write: the last proxy is what is known
		}
		peer = hop
		if !a.trusted(hop) {
			break
		}
	}
	return peer
}

func (a *API) trusted(ip netip.Addr) bool {
	for _, p := range a.TrustedProxies {
		if ip.IsValid() && p.Contains(ip) {
			return true
		}
	}
	return false
}

// clientKey is what per-client budgets count by: the client's address, or
// for IPv6 its /64, the block one subscriber gets (counting single IPv6
// addresses would give one client 2^64 budgets).
func (a *API) clientKey(r *http.Request) string {
	ip := a.clientAddr(r)
	if ip.Is6() {
		p, _ := ip.Prefix(64)
		return p.String()
	}
	if !ip.IsValid() {
		return "unknown"
	}
	return ip.String()
}

// forwardedFor lists the hops of X-Forwarded-For, or of Forwarded's for=
// parameters when there is no X-Forwarded-For, nearest last. A proxy
// writes one of the two; which one is not configurable, so the common one
// wins, and a Forwarded the proxy merely passed on is not read over it.
func forwardedFor(h http.Header) []string {
	var hops []string
	if xff := h.Values("X-Forwarded-For"); len(xff) > 0 {
		for _, v := range xff {
			for hop := range strings.SplitSeq(v, ",") {
				hops = append(hops, strings.TrimSpace(hop))
			}
		}
		return hops
	}
	for _, v := range h.Values("Forwarded") {
		for elem := range strings.SplitSeq(v, ",") {
			hop := "" // an element without for= is a hop we cannot name
			for pair := range strings.SplitSeq(elem, ";") {
				k, val, _ := strings.Cut(strings.TrimSpace(pair), "=")
				if strings.EqualFold(k, "for") {
					hop = strings.Trim(val, `"`)
				}
			}
			hops = append(hops, hop)
		}
	}
	return hops
}

// parseHop reads "192.0.2.1", "192.0.2.1:80", "2001:db8::1" or
// "[2001:db8::1]:80"; anything else ("unknown", "_hidden", garbage) is the
// zero Addr.
func parseHop(s string) netip.Addr {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap()
	}
	if ip, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil && ip.Zone() == "" {
		return ip.Unmap()
	}
	return netip.Addr{}
}
