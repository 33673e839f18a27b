package httpapi

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/linkraft/linkraft/link"
)

func (s *Server) registerRedirectRoutes() {
	// ServeHTTP serves GET and HEAD /{code} for valid codes before the
	// router (redirectCode), so this route sees only strings that cannot
	// be a code: their 404 page, counted against the redirect limit as an
	// unknown code is. Other methods get their 405 and Allow.
	s.router.HandleFunc("/{code}", func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		status := http.StatusTooManyRequests
		if s.limitRedirect(w, r) {
			status = s.redirectError(w, r, link.ErrNotFound)
		}
		s.rec.Redirect(status, time.Since(start))
	}).Methods(http.MethodGet, http.MethodHead)
	// A password link's form posts here (password.go).
	s.router.HandleFunc("/{code}", s.handleUnlock).Methods(http.MethodPost)
}

// fixedSingleSegment are the routes of one path segment that are not codes.
var fixedSingleSegment = map[string]bool{"healthz": true, "readyz": true, "metrics": true}

// redirectCode reports the code of a GET or HEAD /{code} request that the
// router would send to the redirect handler.
func redirectCode(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", false
	}
	p := r.URL.Path
	if len(p) < 2 || p[0] != '/' {
		return "", false
	}
	code := p[1:]
	if !link.ValidCode(code) || fixedSingleSegment[code] {
		return "", false
	}
	return code, true
}

// Shared header values (see nosniff).
var (
	privateMaxAge90 = []string{"private, max-age=90"}
	noStore         = []string{"no-store"}
)

// visitorCSS is the one style of every page a link's visitor may see (a
// link that leads nowhere, the password form, the preview, a link with
// limited visits): the system's font, a readable measure, and dark colours
// when the visitor's system asks for them. Inline, as the pages' Content
// Security Policy allows no other source.
const visitorCSS = `:root{color-scheme:light dark}` +
	`body{font-family:system-ui,sans-serif;max-width:36rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#1f2328;background:#fff}` +
	`a{color:#0550ae}.err{color:#b00020}dt{color:#59636e;margin-top:1rem}dd{margin:0}` +
	`input,button{font:inherit;padding:.5rem;margin:.3rem 0}input{width:100%;box-sizing:border-box}` +
	`@media (prefers-color-scheme:dark){body{color:#e6edf3;background:#0d1117}a{color:#58a6ff}.err{color:#ff7b72}dt{color:#9198a1}}`

var errorPage = template.Must(template.New("error").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Status}} {{.Title}}</title>
<style>` + visitorCSS + `</style>
</head><body><h1>{{.Title}}</h1><p>{{.Detail}}</p></body></html>
`))

// outcome is what a redirect of a link answers. It is decided once, here,
// for the fast path (which answers only redirectNow, and hands everything
// else to net/http) and for net/http (which answers every verdict).
type outcome uint8

const (
	// redirectNow: the redirect, with no side effect but the click.
	redirectNow outcome = iota
	// gone: 410, the link expired, is disabled, deleted or out of visits.
	gone
	// takenDown: 410, its destination (or a rule's) is blocked.
	takenDown
	// askPassword: the password form; its POST goes on (password.go).
	askPassword
	// spendVisit: a limited link, whose GET from a person is granted a
	// visit through Raft first (exact across the cluster).
	spendVisit
)

// outcome decides what a redirect of l answers now.
func (s *Server) outcome(l *link.Link) outcome {
	switch {
	case l.Gone(s.now()):
		return gone
	case s.blocked(l):
		return takenDown
	case l.PasswordHash != "":
		return askPassword
	case l.MaxVisits > 0:
		return spendVisit
	}
	return redirectNow
}

// target is where a redirect of l sends a client (ua, ip and
// acceptLanguage for its rules, query for the destination) and the
// Cache-Control of the answer ("" for none).
func (s *Server) target(l *link.Link, ua string, ip netip.Addr, acceptLanguage, query string) (loc, cacheControl string) {
	dest := l.URL
	if len(l.Rules) > 0 {
		dest = l.Destination(s.visitor(ua, ip, acceptLanguage))
	}
	switch {
	case len(l.Rules) > 0:
		cacheControl = noStore[0] // the answer depends on who asks
	case l.Redirect == http.StatusFound, l.Redirect == http.StatusTemporaryRedirect:
		cacheControl = privateMaxAge90[0]
	}
	return location(l, dest, query), cacheControl
}

// handleRedirect serves GET and HEAD /{code}: the link's redirect status and
// Location exactly as stored, from this node's state; 404 for unknown codes,
// 410 for expired, disabled or deleted links.
func (s *Server) handleRedirect(w http.ResponseWriter, r *http.Request, code string) {
	start := time.Now()
	status := s.redirect(w, r, code)
	s.rec.Redirect(status, time.Since(start))
}

// redirect answers GET or HEAD of code, a valid code (redirectCode), and
// returns the status it wrote.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, code string) int {
	if !s.limitRedirect(w, r) {
		return http.StatusTooManyRequests
	}
	l, err := s.links.Resolve(r.Context(), code)
	if err != nil {
		if errors.Is(err, link.ErrNotFound) {
			if s.clicks != nil {
				s.clicks.RecordOrphan(code) // mistyped or scraped
			}
			return s.redirectError(w, r, err)
		}
		return s.Error(w, r, err)
	}
	switch s.outcome(l) {
	case gone:
		return s.redirectError(w, r, s.goneReason(l))
	case takenDown:
		return s.redirectError(w, r, errTakenDown)
	case askPassword:
		return s.writePasswordPage(w, r, http.StatusOK)
	case spendVisit:
		// HEAD and bots (link unfurlers, scanners) neither use a visit up
		// nor learn where the link goes: the destination of a link with
		// limited visits is given only for a visit (issue 26).
		if r.Method != http.MethodGet || s.analytics.IsBot(strings.Clone(clip(r.UserAgent(), MaxUserAgent))) {
			writePage(w, r, http.StatusOK, limitedVisitsPage, "no-store", "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'")
			return http.StatusOK
		}
		if l, err = s.links.ConsumeVisit(r.Context(), code); err != nil {
			return s.consumeError(w, r, err)
		}
	}
	loc, cc := s.target(l, r.UserAgent(), s.clientIP(r), r.Header.Get("Accept-Language"), r.URL.RawQuery)
	h := w.Header()
	h["Location"] = []string{loc}
	if cc != "" {
		h["Cache-Control"] = []string{cc}
	}
	w.WriteHeader(l.Redirect)
	if s.clicks != nil && r.Method == http.MethodGet {
		s.recordClick(l.Code, s.clientIP(r), r.UserAgent(), r.Referer(),
			r.Header.Get("DNT") == "1" || r.Header.Get("Sec-GPC") == "1")
	}
	return l.Redirect
}

// limitedVisitsPage is what HEAD and bots get for a link with limited
// visits: no destination, no visit used.
var limitedVisitsPage = []byte(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex, nofollow">
<meta name="viewport" content="width=device-width, initial-scale=1"><title>A link with limited visits</title>
<style>` + visitorCSS + `</style>
</head><body><h1>A link with limited visits</h1>
<p>This link can be opened a limited number of times. Open it in a browser to use one of its visits; where it
leads is shown only then.</p></body></html>
`)

// location is where a redirect of l to dest (l.URL, or a rule's URL) for a
// request with query sends the client: dest, plus the query unless the
// link drops it.
func location(l *link.Link, dest, query string) string {
	if l.DropQuery || query == "" {
		return dest
	}
	return link.ForwardQuery(dest, query)
}

// maxAcceptLanguage bounds what a rule reads of Accept-Language (bytes).
const maxAcceptLanguage = 256

// visitor is what rules know of a client: its device (Config.Platform),
// its country (Analytics.Country, as the stats count it) and its most
// preferred language.
func (s *Server) visitor(ua string, ip netip.Addr, acceptLanguage string) link.Visitor {
	v := link.Visitor{Language: link.PreferredLanguage(clip(acceptLanguage, maxAcceptLanguage))}
	if c := s.analytics.Country(ip); c != "unknown" {
		v.Country = c
	}
	// The platform memo copies what it keeps (a clip of a 64 KiB header
	// would otherwise pin the whole header).
	v.Device = s.analytics.Platform(clip(ua, MaxUserAgent))
	return v
}

// MaxUserAgent and MaxReferer bound what analytics takes of those headers
// (bytes): a click costs the same whatever the client sends, and a 60 KB
// User-Agent neither grows the click buffer nor slows the bot detector.
const (
	MaxUserAgent = 512
	MaxReferer   = 1024
)

// clip cuts s to at most n bytes.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// blocked reports whether l leads to a blocked domain, through its URL
// or any rule's: the whole link is taken down (410), as a link to it is.
func (s *Server) blocked(l *link.Link) bool {
	if s.keys.BlockedURL(l.URL) {
		return true
	}
	for i := range l.Rules {
		if s.keys.BlockedURL(l.Rules[i].URL) {
			return true
		}
	}
	return false
}

// errTakenDown answers a link whose destination is on the blocklist.
var errTakenDown = fmt.Errorf("%w: the link was disabled for abuse", link.ErrGone)

// Why a link is gone, for its visitors (each wraps link.ErrGone, so the
// problem type stays "gone"): the 410 page and the problem's detail say
// which.
var (
	errExpired  = fmt.Errorf("%w: the link has expired", link.ErrGone)
	errDisabled = fmt.Errorf("%w: the link was turned off by its owner", link.ErrGone)
	errUsedUp   = fmt.Errorf("%w: the link's visits are used up", link.ErrGone)
)

// goneReason is why l, which is gone now, is gone.
func (s *Server) goneReason(l *link.Link) error {
	switch {
	case l.Deleted:
		return link.ErrDeleted
	case l.Disabled:
		return errDisabled
	case l.Expired(s.now()):
		return errExpired
	case l.OutOfVisits():
		return errUsedUp
	}
	return link.ErrGone
}

// recordClick hands a GET redirect to analytics, never waiting for it;
// HEAD is a link checker, not a visit. private is DNT: 1 or Sec-GPC: 1.
// The strings are clipped here; the recorder copies them before it
// returns (they may be views of the connection's buffer), into its own
// inbox: a click allocates nothing.
func (s *Server) recordClick(code string, ip netip.Addr, ua, referer string, private bool) {
	s.clicks.Record(link.Click{Code: code, Time: s.now(), IP: ip,
		UA: clip(ua, MaxUserAgent), Referer: clip(referer, MaxReferer), Private: private})
}

// remoteIP is the connection's peer address (proxies' X-Forwarded-For is
// not trusted).
func remoteIP(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr()
}

// consumeError answers a failed ConsumeVisit: a link used up or gone
// meanwhile is 410 (used up), anything else as any error.
func (s *Server) consumeError(w http.ResponseWriter, r *http.Request, err error) int {
	if errors.Is(err, link.ErrGone) || errors.Is(err, link.ErrNotFound) {
		return s.redirectError(w, r, errUsedUp)
	}
	return s.Error(w, r, err)
}

// redirectError answers 404 or 410: a small page for browsers, a problem
// document for everyone else.
func (s *Server) redirectError(w http.ResponseWriter, r *http.Request, err error) int {
	status, title, detail := http.StatusNotFound, "No such link", "There is no link with this code. Check the address for a typo."
	switch {
	case errors.Is(err, errTakenDown):
		status, title, detail = http.StatusGone, "Link taken down", "This link led to a site blocked for abuse, and was taken down."
	case errors.Is(err, link.ErrDeleted):
		status, title, detail = http.StatusGone, "Link removed", "This link was deleted by its owner. Its code will not be given to another link."
	case errors.Is(err, errDisabled):
		status, title, detail = http.StatusGone, "Link turned off", "The owner of this link has turned it off. It may be turned on again."
	case errors.Is(err, errExpired):
		status, title, detail = http.StatusGone, "Link expired", "This link had an end date, and it has passed."
	case errors.Is(err, errUsedUp):
		status, title, detail = http.StatusGone, "Link used up", "This link could be opened a limited number of times, and every one has been used."
	case errors.Is(err, link.ErrGone):
		status, title, detail = http.StatusGone, "Link gone", "This link no longer leads anywhere."
	}
	if !wantsHTML(r) {
		return s.Error(w, r, err)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_ = errorPage.Execute(w, struct {
			Status        int
			Title, Detail string
		}{status, title, detail})
	}
	return status
}
