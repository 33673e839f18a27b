package link

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// DefaultMaxURLLength is the default bound on a destination URL, in bytes.
const DefaultMaxURLLength = 8 << 10

// Alias length bounds (DESIGN section 3).
const (
	MinAliasLength = 3
	MaxAliasLength = 64
)

// reserved are the words that may never be a code: they are, or may become,
// top-level routes of the HTTP API. They are compared case-insensitively.
var reserved = map[string]struct{}{
	"api": {}, "admin": {}, "metrics": {}, "healthz": {}, "readyz": {}, "livez": {},
	"static": {}, "internal": {}, "debug": {}, "favicon.ico": {}, "robots.txt": {},
	"login": {}, "logout": {}, "ui": {}, "assets": {}, "health": {}, "status": {},
	"version": {}, "well-known": {}, ".well-known": {},
	// Words of /api/v1/links/... routes.
	"export": {}, "import": {}, "bulk": {}, "bulk-update": {}, "bulk-delete": {},
}

// IsReserved reports whether code is a reserved word (case-insensitive).
func IsReserved(code string) bool {
	_, ok := reserved[strings.ToLower(code)]
	return ok
}

// ValidateAlias checks a custom alias: 3–64 characters of [A-Za-z0-9_-], not a
// reserved word.
func ValidateAlias(alias string) error {
	if len(alias) < MinAliasLength || len(alias) > MaxAliasLength {
		return &FieldError{Err: ErrInvalidAlias, Field: "alias", Reason: fmt.Sprintf("must be %d to %d characters", MinAliasLength, MaxAliasLength)}
	}
	for i := 0; i < len(alias); i++ {
		c := alias[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return &FieldError{Err: ErrInvalidAlias, Field: "alias", Reason: "may contain only A-Z, a-z, 0-9, '_' and '-'"}
		}
	}
	if IsReserved(alias) {
		return &FieldError{Err: ErrInvalidAlias, Field: "alias", Reason: "is a reserved word"}
	}
	return nil
}

// ValidCode reports whether s could be a code at all (generated or alias):
// 1–64 characters of [A-Za-z0-9_-]. The redirect path uses it to reject
// garbage before touching any state.
func ValidCode(s string) bool {
	if len(s) == 0 || len(s) > MaxAliasLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// URLPolicy holds the rules a destination URL must satisfy.
type URLPolicy struct {
	// MaxLength bounds the URL in bytes; 0 means DefaultMaxURLLength.
	MaxLength int
	// OwnHosts are the service's own public host names: links to them are
	// refused so the service cannot be made to redirect to itself.
	OwnHosts []string
	// Blocklist holds blocked domains; a domain blocks its subdomains too.
	Blocklist map[string]struct{}
	// Blocked, if set, is a second blocklist asked at each check (the
	// cluster's replicated one).
	Blocked func(host string) bool
	// AllowPrivate accepts as destinations literal private, link-local,
	// shared, metadata and other special-purpose addresses (privateNets,
	// and NAT64, 6to4 and IPv4-compatible forms of them), metadata names
	// (internalNames) and single-label or private-use names (intranet,
	// *.internal, *.local, *.home.arpa); loopback is refused either way.
	AllowPrivate bool
}

// privateNets are the destinations refused unless AllowPrivate: a short
// link must not be a way into the network the service runs in. They are
// RFC 6890's special-purpose ranges that are not globally reachable, but
// for the documentation ones (192.0.2/24, 198.51.100/24, 203.0.113/24,
// 2001:db8::/32), which route nowhere.
var privateNets = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("169.254.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("192.0.0.0/24"),  // IETF protocol assignments (192.0.0.192: Oracle Cloud metadata)
	netip.MustParsePrefix("198.18.0.0/15"), // benchmarking
	netip.MustParsePrefix("224.0.0.0/4"),   // multicast
	netip.MustParsePrefix("240.0.0.0/4"),   // reserved, and the broadcast address
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("fe80::/10"),
	netip.MustParsePrefix("fec0::/10"), // site-local (deprecated, still routed inside some networks)
	netip.MustParsePrefix("ff00::/8"),  // multicast
	netip.MustParsePrefix("100::/64"),  // discard-only
	netip.MustParsePrefix("::/96"),     // IPv4-compatible (deprecated): ::a9fe:a9fe is 169.254.169.254
}

// embeddedV4 are IPv6 prefixes whose addresses carry an IPv4 address that
// a gateway reaches for them: NAT64 (the last 32 bits) and 6to4 (bits 16
// to 48).
var embeddedV4 = []struct {
	p      netip.Prefix
	offset int
}{
	{netip.MustParsePrefix("64:ff9b::/96"), 12},
	{netip.MustParsePrefix("64:ff9b:1::/48"), 12},
	{netip.MustParsePrefix("2002::/16"), 2},
}

// privateAddr reports an address in privateNets (an IPv4-mapped IPv6
// address counts as its IPv4 address, and a NAT64 or 6to4 address as the
// IPv4 address it carries).
func privateAddr(ip net.IP) bool {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return false
	}
	a = a.Unmap()
	for _, e := range embeddedV4 {
		if e.p.Contains(a) {
			b := a.As16()
			v4 := netip.AddrFrom4([4]byte(b[e.offset : e.offset+4]))
			if v4.IsLoopback() || v4.IsUnspecified() || privateAddr(v4.AsSlice()) {
				return true
			}
		}
	}
	for _, p := range privateNets {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// internalNames are the cloud metadata services' names (their addresses
// are in privateNets, but a name is resolved where the link is followed).
var internalNames = []string{"metadata.google.internal", "metadata.goog", "metadata", "instance-data", "instance-data.ec2.internal"}

// privateName reports a destination name that only means something inside
// a network: a metadata service, a single label ("intranet"), or a name
// under a private-use or link-local domain.
func privateName(host string) bool {
	if slices.Contains(internalNames, host) || !strings.Contains(host, ".") {
		return true
	}
	for _, suffix := range []string{".internal", ".local", ".localdomain", ".home.arpa", ".intranet", ".lan", ".corp"} {
		if strings.HasSuffix(host, suffix) {
			return true
		}
	}
	return false
}

// NormalizeURL validates raw against the policy and returns the URL to store:
// scheme and host lowercased, an IDN host converted to punycode, the rest as
// given. It refuses other schemes than http and https, missing hosts,
// userinfo, control characters and spaces, over-long URLs, the service's own
// host and blocklisted domains.
func (p URLPolicy) NormalizeURL(raw string) (string, error) {
	max := p.MaxLength
	if max <= 0 {
		max = DefaultMaxURLLength
	}
	bad := func(reason string) error {
		return &FieldError{Err: ErrInvalidURL, Field: "url", Reason: reason}
	}
	if raw == "" {
		return "", bad("is required")
	}
	if len(raw) > max {
		return "", bad(fmt.Sprintf("is longer than %d bytes", max))
	}
	if !utf8.ValidString(raw) {
		return "", bad("is not valid UTF-8")
	}
	if hasControlOrSpace(raw, true) {
		return "", bad("may not contain spaces or control characters")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", bad("cannot be parsed")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", bad("must use http or https")
	}
	if u.Opaque != "" {
		return "", bad("must be an absolute http(s) URL with a host")
	}
	if u.User != nil {
		return "", bad("may not contain user information")
	}
	host := u.Hostname()
	if host == "" {
		return "", bad("must have a host")
	}
	port := u.Port()
	if strings.Contains(u.Host, ":") && !strings.HasPrefix(u.Host, "[") && port == "" {
		return "", bad("has an empty port")
	}
	var asciiHost string
	ip := net.ParseIP(host)
	if ip != nil {
		if strings.Contains(host, "%") {
			return "", bad("has an IPv6 zone")
		}
		asciiHost = ip.String()
		if ip.To4() == nil {
			asciiHost = strings.ToLower(host)
		}
	} else {
		if !utf8.ValidString(host) {
			// A percent-escaped byte that is no UTF-8 ("%80"): idna would
			// map it to U+FFFD and return a name it refuses itself.
			return "", bad("has an invalid host name")
		}
		asciiHost, err = idna.Lookup.ToASCII(strings.TrimSuffix(host, "."))
		if err != nil || asciiHost == "" || slices.Contains(strings.Split(asciiHost, "."), "") {
			// Empty labels ("..", ".example.com") are no host at all.
			return "", bad("has an invalid host name")
		}
		asciiHost = strings.ToLower(asciiHost)
		if again, err := idna.Lookup.ToASCII(asciiHost); err != nil || again != asciiHost {
			// What is stored must read back as itself.
			return "", bad("has an invalid host name")
		}
		// Checked after the mapping: IDNA turns other digits and dots
		// into ASCII ones ("１２７．０．０．１" is 127.0.0.1, "¹" is 1).
		if numericLastLabel(asciiHost) {
			// Browsers read "2130706433", "0x7f.1" or "127.1" as IPv4
			// addresses; only the dotted-quad form is accepted, and it is
			// an address like any other, so host checks cannot be dodged.
			if ip = net.ParseIP(asciiHost); ip == nil || ip.To4() == nil {
				return "", bad("has a numeric host that is not a dotted-quad IPv4 address")
			}
			asciiHost = ip.String()
		}
	}
	if (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) || asciiHost == "localhost" || strings.HasSuffix(asciiHost, ".localhost") {
		return "", bad("may not point at a loopback address")
	}
	if ip != nil && !p.AllowPrivate && privateAddr(ip) {
		return "", bad("may not point at a private, link-local, metadata or other special-purpose address")
	}
	if ip == nil && !p.AllowPrivate && privateName(asciiHost) {
		return "", bad("may not point at a name that only resolves inside a network (a single label, *.internal, *.local, a metadata service)")
	}
	if p.isOwnHost(asciiHost) {
		return "", bad("may not point at this service")
	}
	if p.blocked(asciiHost) || (p.Blocked != nil && p.Blocked(asciiHost)) {
		return "", bad("points at a blocked domain")
	}
	u.Scheme = scheme
	hostport := asciiHost
	if strings.Contains(asciiHost, ":") {
		hostport = "[" + asciiHost + "]"
	}
	if port != "" {
		hostport += ":" + port
	}
	u.Host = hostport
	out := u.String()
	if len(out) > max {
		return "", bad(fmt.Sprintf("is longer than %d bytes", max))
	}
	return out, nil
}

// isOwnHost reports the service's own host, or a www. variant of it
// either way (www.short.example for short.example, and back).
func (p URLPolicy) isOwnHost(host string) bool {
	host = strings.TrimPrefix(host, "www.")
	for _, h := range p.OwnHosts {
		if strings.TrimPrefix(canonicalHost(h), "www.") == host {
			return true
		}
	}
	return false
}

// canonicalHost is the form NormalizeURL compares hosts in: an IP in
// net.IP's string form, a name lowercased in punycode without a final dot.
func canonicalHost(h string) string {
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if ip := net.ParseIP(h); ip != nil {
		if ip.To4() != nil {
			return ip.String()
		}
		return strings.ToLower(h)
	}
	if a, err := idna.Lookup.ToASCII(strings.TrimSuffix(h, ".")); err == nil {
		return strings.ToLower(a)
	}
	return strings.ToLower(h)
}

// numericLastLabel reports a host whose last label is a number (decimal or
// 0x-hex): the WHATWG URL parser treats such a host as an IPv4 address.
func numericLastLabel(host string) bool {
	h := strings.TrimSuffix(host, ".")
	if i := strings.LastIndexByte(h, '.'); i >= 0 {
		h = h[i+1:]
	}
	if h == "" {
		return false
	}
	if strings.HasPrefix(h, "0x") || strings.HasPrefix(h, "0X") {
		h = h[2:]
		for _, c := range h {
			if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
				return false
			}
		}
		return true
	}
	for _, c := range h {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func (p URLPolicy) blocked(host string) bool { return InDomains(p.Blocklist, host) }

// InDomains reports whether host, or a domain it is under, is a key of
// set: a blocked domain blocks its subdomains. An IP address matches only
// itself. host is compared lowercased, without a final dot.
func InDomains[V any](set map[string]V, host string) bool {
	if len(set) == 0 {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if net.ParseIP(host) != nil {
		_, ok := set[host]
		return ok
	}
	for {
		if _, ok := set[host]; ok {
			return true
		}
		i := strings.IndexByte(host, '.')
		if i < 0 {
			return false
		}
		host = host[i+1:]
	}
}

// ReadBlocklist parses a blocklist: one domain per line, blank lines and
// lines starting with '#' ignored. Domains are converted to punycode and
// lowercased.
func ReadBlocklist(r io.Reader) (map[string]struct{}, error) {
	out := make(map[string]struct{})
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		d := strings.TrimSpace(sc.Text())
		if d == "" || strings.HasPrefix(d, "#") {
			continue
		}
		d = strings.TrimPrefix(d, "*.")
		if net.ParseIP(d) != nil {
			out[canonicalHost(d)] = struct{}{}
			continue
		}
		a, err := idna.Lookup.ToASCII(strings.TrimSuffix(d, "."))
		if err != nil || a == "" {
			return nil, fmt.Errorf("blocklist line %d: invalid domain %q", line, d)
		}
		out[strings.ToLower(a)] = struct{}{}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read blocklist: %w", err)
	}
	return out, nil
}

// hasControlOrSpace reports control characters (C0, DEL, C1), and with
// spaces=true any Unicode white space as well.
func hasControlOrSpace(s string, spaces bool) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == utf8.RuneError {
			return true
		}
		if spaces && unicode.IsSpace(r) {
			return true
		}
		if unicode.Is(unicode.Cf, r) && r != 0x200d {
			// format characters (bidi overrides, zero-width) hide what a
			// link really says.
			return true
		}
	}
	return false
}
