package httpapi

import (
	"net"
	"net/netip"
	"time"
	"unsafe"

	"github.com/linkraft/linkraft/httpapi/fastpath"
	"github.com/linkraft/linkraft/link"
)

// FastListener wraps ln with the redirect fast path (package fastpath),
// answering GET and HEAD /{code} for a link this node holds that is live,
// not blocked and has neither a visit limit nor a password, as
// handleRedirect would. Serve the
// returned listener with the http.Server whose Handler is s; call Shutdown
// after the server's own.
func (s *Server) FastListener(ln net.Listener, opts fastpath.Options) *fastpath.Listener {
	return fastpath.New(ln, fastHandler{s}, opts)
}

// fastHandler is the Server's side of the fast path.
type fastHandler struct{ s *Server }

// Redirect answers what handleRedirect would answer with a redirect and no
// side effect but the click: everything else (unknown, gone, blocked or
// limited links, a redirect rate limit) declines, and net/http answers.
func (h fastHandler) Redirect(r *fastpath.Request) (fastpath.Answer, bool) {
	s := h.s
	code := string(r.Segment)
	if !link.ValidCode(code) || fixedSingleSegment[code] {
		return fastpath.Answer{}, false
	}
	lk, ok := s.links.ResolveLocal(code)
	if !ok || s.outcome(lk) != redirectNow {
		return fastpath.Answer{}, false
	}
	if s.redirRate.PerSecond > 0 {
		// With a redirect limit, net/http answers (and counts) it: the
		// limit's headers and 429 are written there.
		return fastpath.Answer{}, false
	}
	faultPanic()
	// The query, the UA and Accept-Language are views of the
	// connection's buffer: location and visitor copy what they keep.
	var ip netip.Addr
	if len(lk.Rules) > 0 {
		ip = s.fastClientIP(r)
	}
	loc, cc := s.target(lk, unsafeString(r.UserAgent), ip, unsafeString(r.AcceptLanguage), unsafeString(r.Query))
	return fastpath.Answer{Status: lk.Redirect, Location: loc, CacheControl: cc, ID: lk.Code}, true
}

// Served records the click (GET only, as handleRedirect) and the latency.
func (h fastHandler) Served(r *fastpath.Request, a fastpath.Answer, start time.Time) {
	s := h.s
	if s.clicks != nil && !r.Head {
		s.recordClick(a.ID, s.fastClientIP(r), unsafeString(clipBytes(r.UserAgent, MaxUserAgent)),
			unsafeString(clipBytes(r.Referer, MaxReferer)), r.Private)
	}
	s.rec.Redirect(a.Status, time.Since(start))
}

// fastClientIP is clientIP for the fast path's parsed head.
func (s *Server) fastClientIP(r *fastpath.Request) netip.Addr {
	peer := connIP(r.Conn)
	if len(s.proxies) == 0 || (r.Forwarded == nil && r.XForwardedFor == nil) {
		return peer
	}
	var fwd, xff []string
	if r.Forwarded != nil {
		fwd = []string{string(r.Forwarded)}
	}
	if r.XForwardedFor != nil {
		xff = []string{string(r.XForwardedFor)}
	}
	return s.proxies.clientAddr(peer, fwd, xff)
}

func clipBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// unsafeString views b as a string without copying; recordClick copies
// what it keeps before b's buffer is reused.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// connIP is the connection's peer address (as remoteIP).
func connIP(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(a.IP)
		return ip.Unmap()
	}
	return netip.Addr{}
}
