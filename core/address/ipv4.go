package address

import (
	"net/netip"
	"strings"
)

// inetAton parses s as BSD's inet_aton (and so glibc's getaddrinfo for a
// numeric host) reads an IPv4 address: one to four parts separated by dots,
// each decimal, octal with a leading 0, or hexadecimal with 0x; the last
// part fills the bytes that remain ("127.1" is 127.0.0.1, "2130706433" is
// 127.0.0.1 too). What inet_aton refuses, it refuses.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var v [4]uint64
	for i, p := range parts {
		n, ok := atonPart(p)
		if !ok {
			return netip.Addr{}, false
		}
		v[i] = n
	}
	// The last part covers 32, 24, 16 or 8 bits; every other part one byte.
	last := len(parts) - 1
	if v[last] >= 1<<(8*(4-last)) {
		return netip.Addr{}, false
	}
	var ip uint64
	for i := range last {
		if v[i] > 0xff {
			return netip.Addr{}, false
		}
		ip |= v[i] << (24 - 8*i)
	}
	ip |= v[last]
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), true
}

// atonPart parses one part: 0x1f (hex; "0x" alone is 0, as in glibc), 017
// (octal), 15 (decimal). Values beyond 32 bits are refused.
func atonPart(p string) (uint64, bool) {
	base, digits := uint64(10), p
	switch {
	case p == "":
		return 0, false
	case len(p) >= 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'):
		base, digits = 16, p[2:]
	case p[0] == '0':
		base = 8
	}
	var n uint64
	for i := 0; i < len(digits); i++ {
		c := digits[i]
		var d uint64
		switch {
		case '0' <= c && c <= '9':
			d = uint64(c - '0')
		case 'a' <= c && c <= 'f':
			d = uint64(c-'a') + 10
		case 'A' <= c && c <= 'F':
			d = uint64(c-'A') + 10
		default:
			return 0, false
		}
		if d >= base {
			return 0, false
		}
		if n = n*base + d; n > 0xffffffff {
			return 0, false
		}
	}
	return n, true
}
