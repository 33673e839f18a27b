package link

import (
	"net/url"
	"strings"
)

// MaxForwardedQuery bounds the bytes of a request's query that a redirect
// adds to its destination; the parameters past it are left out.
const MaxForwardedQuery = 2048

// ForwardQuery returns dest with the parameters of query (a request's raw
// query string) added to its own, as Shlink does: a parameter the
// destination already has keeps the destination's value, and the
// destination's fragment stays last. Parameters that do not decode, have
// no name or would carry bytes a Location header must not hold are left
// out, and so is everything past MaxForwardedQuery bytes. With nothing to
// add, dest is returned as it is.
func ForwardQuery(dest, query string) string {
	if query == "" {
		return dest
	}
	base, frag, hasFrag := strings.Cut(dest, "#")
	path, own, hasOwn := strings.Cut(base, "?")
	var b strings.Builder
	added := 0
	for pair := range strings.SplitSeq(query, "&") {
		if pair == "" || !queryBytesSafe(pair) {
			continue
		}
		k, _, _ := strings.Cut(pair, "=")
		name, err := url.QueryUnescape(k)
		if err != nil || name == "" || hasParam(own, name) {
			continue
		}
		if _, err := url.QueryUnescape(pair[len(k):]); err != nil {
			continue
		}
		if added+len(pair)+1 > MaxForwardedQuery {
			break
		}
		if b.Len() == 0 {
			b.Grow(len(dest) + len(query) + 1)
			b.WriteString(path)
			b.WriteByte('?')
			if hasOwn && own != "" {
				b.WriteString(own)
				b.WriteByte('&')
			}
		} else {
			b.WriteByte('&')
		}
		b.WriteString(pair)
		added += len(pair) + 1
	}
	if b.Len() == 0 {
		return dest
	}
	if hasFrag {
		b.WriteByte('#')
		b.WriteString(frag)
	}
	return b.String()
}

// hasParam reports whether the raw query q has a parameter named name.
func hasParam(q, name string) bool {
	for pair := range strings.SplitSeq(q, "&") {
		k, _, _ := strings.Cut(pair, "=")
		if n, err := url.QueryUnescape(k); err == nil && n == name {
			return true
		}
	}
	return false
}

// queryBytesSafe reports whether s holds only printable ASCII other than
// '#': what may follow a destination in a Location header unchanged.
func queryBytesSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}
