package httpapi

import (
	"net/http"
	"net/netip"
	"strings"
)

// The client address of a request is the connection's peer, unless that
// peer is a trusted proxy (-trusted-proxies): then it is the rightmost
// address of Forwarded (for=) or, without it, X-Forwarded-For that is not
// itself a trusted proxy. Everything left of it was written by the client
// and is ignored, so a client cannot choose its address by sending the
// header itself.

// trustedProxies is the set of proxy networks.
type trustedProxies []netip.Prefix

func (t trustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddr picks the client address from the peer and the forwarding
// headers' values (all Forwarded fields, all X-Forwarded-For fields).
func (t trustedProxies) clientAddr(peer netip.Addr, forwarded, xff []string) netip.Addr {
	peer = peer.Unmap()
	if len(t) == 0 || !t.contains(peer) {
		return peer
	}
	var hops []string
	if len(forwarded) > 0 {
		for _, f := range forwarded {
			for _, elem := range strings.Split(f, ",") {
				for _, pair := range strings.Split(elem, ";") {
					k, v, ok := strings.Cut(strings.TrimSpace(pair), "=")
					if ok && strings.EqualFold(k, "for") {
						hops = append(hops, v)
					}
				}
			}
		}
	} else {
		for _, f := range xff {
			hops = append(hops, strings.Split(f, ",")...)
		}
	}
	cur := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseHop(hops[i])
		if !ok {
			return cur // unparseable: trust nothing further left
		}
		if !t.contains(a) {
			return a
		}
		cur = a
	}
	return cur
}

// parseHop reads one forwarding hop: an address, "[v6]", quoted, with or
// without a port.
func parseHop(h string) (netip.Addr, bool) {
	h = strings.Trim(strings.TrimSpace(h), `"`)
	if ap, err := netip.ParseAddrPort(h); err == nil {
		return ap.Addr().Unmap(), true
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	a, err := netip.ParseAddr(h)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// clientIP is the request's client address (see above).
func (s *Server) clientIP(r *http.Request) netip.Addr {
	peer := remoteIP(r)
	if len(s.proxies) == 0 {
		return peer
	}
	return s.proxies.clientAddr(peer, r.Header.Values("Forwarded"), r.Header.Values("X-Forwarded-For"))
}
