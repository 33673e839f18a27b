// Package netid names the client behind an address as every per-client
// limit of linkraft counts it (the HTTP connection guard, the rate limits,
// the peer port's pending connections): an IPv4 address by itself (an
// IPv4-mapped IPv6 address too), an IPv6 address by its /64, since one
// host or subscriber holds a whole /64 and a cap per exact address would
// be moot. Zones are dropped.
package netid

import (
	"net"
	"net/netip"
)

// Of is the client of ip: a /32 for IPv4, a /64 for IPv6. The zero Prefix
// for an invalid ip.
func Of(ip netip.Addr) netip.Prefix {
	ip = ip.Unmap().WithZone("")
	bits := 32
	if ip.Is6() {
		bits = 64
	}
	p, _ := ip.Prefix(bits)
	return p
}

// OfAddr is Of for a network address; ok is false when it holds no IP
// (a Unix socket).
func OfAddr(a net.Addr) (netip.Prefix, bool) {
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return Of(ip), true
		}
		return netip.Prefix{}, false
	}
	if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		return Of(ap.Addr()), true
	}
	return netip.Prefix{}, false
}

// Key is p as a map key and in logs: the address alone for IPv4
// ("192.0.2.7"), the prefix for IPv6 ("2001:db8:1:2::/64").
func Key(p netip.Prefix) string {
	if p.Addr().Is4() {
		return p.Addr().String()
	}
	return p.String()
}
