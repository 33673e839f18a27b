// Package webui is linkraft's web UI: server-rendered pages under /ui/ on
// the public listener, for people who will never use curl. It is a client
// of the HTTP API in the same process: every page reads and writes through
// the API's own handlers (validation, scopes, owners, rate limits and
// problem details included), called as the signed-in key (httpapi.AsKey),
// so the UI can do nothing the key could not do with curl.
//
// Who may call it (DESIGN section 11): the sign-in page and the static
// files are public; every other page needs a session, which only a valid
// API key buys. The session is an HMAC-signed cookie that names the key's
// ID and an expiry (never the secret), HttpOnly, SameSite=Strict, Secure
// when served over TLS; it is checked against the cluster's keys on every
// request, so a revoked key's sessions end at once. Every form that changes
// something carries a CSRF token bound to the session, and cross-origin
// unsafe requests are refused before that (net/http's
// CrossOriginProtection). Pages are HTML with a Content Security Policy
// that allows only this origin's scripts and styles.
package webui

import (
	"cmp"
	"context"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
)

// Keys finds the key a session names (implemented by cluster.Keys and by
// httpapi's Keys role).
type Keys interface {
	// Authenticate returns the key of a secret, or apikey.ErrUnauthorized.
	Authenticate(secret string) (apikey.Key, error)
	// Key returns the key with id, or apikey.ErrNotFound.
	Key(id string) (apikey.Key, error)
}

// maxFormBytes bounds the body of a form (an import streams its file).
const maxFormBytes = 256 << 10

// DefaultSessionTTL is how long a sign-in lasts.
const DefaultSessionTTL = 12 * time.Hour

// Config configures the UI.
type Config struct {
	// API is the public listener's handler (an *httpapi.Server); the UI
	// calls it in-process for every read and write.
	API http.Handler
	// Admin is the admin listener's handler, for the cluster page (nil:
	// the page says the node has none).
	Admin http.Handler
	// Keys authenticates sign-ins and finds a session's key.
	Keys Keys
	// Secret signs session cookies and CSRF tokens: at least 32 bytes,
	// the same on every node (clusterkey.Key.SessionKey) so that a session
	// is good on any node behind a load balancer.
	Secret []byte
	// PublicURL is the node's public base URL; an https one marks the
	// session cookie Secure even when TLS ends at a proxy.
	PublicURL string
	// SessionTTL is how long a sign-in lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	// Logger receives sign-ins, sign-outs and internal errors.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// UI serves /ui/.
type UI struct {
	api, admin http.Handler
	keys       Keys
	secret     []byte
	secure     bool
	ttl        time.Duration
	log        *slog.Logger
	now        func() time.Time
	mux        *http.ServeMux
	pages      map[string]*template.Template
	static     *assets
	origin     *http.CrossOriginProtection
}

// ErrConfig is returned by New for a configuration it cannot serve.
var ErrConfig = errors.New("webui: bad configuration")

// New builds the UI.
func New(cfg Config) (*UI, error) {
	if cfg.API == nil || cfg.Keys == nil {
		return nil, errors.Join(ErrConfig, errors.New("API and Keys are required"))
	}
	if len(cfg.Secret) < 32 {
		return nil, errors.Join(ErrConfig, errors.New("the session secret must have at least 32 bytes"))
	}
	u := &UI{
		api: cfg.API, admin: cfg.Admin, keys: cfg.Keys, secret: append([]byte(nil), cfg.Secret...),
		ttl: cmp.Or(cfg.SessionTTL, DefaultSessionTTL), log: cfg.Logger, now: cfg.Now, mux: http.NewServeMux(),
		origin: http.NewCrossOriginProtection(),
	}
	u.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.log.Warn("web ui: a cross-origin write refused", "path", r.URL.Path, "origin", r.Header.Get("Origin"))
		u.errorPage(w, r, http.StatusForbidden, "Refused", "This request came from another site.")
	}))
	if pu, err := url.Parse(cfg.PublicURL); err == nil && pu.Scheme == "https" {
		u.secure = true
	}
	if u.log == nil {
		u.log = slog.New(slog.DiscardHandler)
	}
	if u.now == nil {
		u.now = time.Now
	}
	var err error
	if u.static, err = loadAssets(); err != nil {
		return nil, err
	}
	if u.pages, err = parsePages(u.static); err != nil {
		return nil, err
	}
	u.routes()
	return u, nil
}

// Mount returns the public listener's handler with the UI in front of api:
// /ui and /ui/... go to the UI, GET / sends a browser (a request that
// accepts text/html) to /ui/, and /favicon.ico, which browsers ask every
// site for, is the UI's icon; everything else, API clients' / included,
// goes to api unchanged.
func Mount(ui *UI, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/ui/"):
			ui.ServeHTTP(w, r)
		case p == "/favicon.ico" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			ui.serveAsset(w, r, "favicon.svg")
		case p == "/ui" || p == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && acceptsHTML(r):
			http.Redirect(w, r, "/ui/", http.StatusSeeOther)
		default:
			api.ServeHTTP(w, r)
		}
	})
}

// acceptsHTML reports whether the client names text/html in Accept, as a
// browser navigating does.
func acceptsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// ServeHTTP implements http.Handler.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("X-Frame-Options", "DENY")
	u.mux.ServeHTTP(w, r)
}

// routes registers every page. Pages that change something are POSTs
// under the session, the CSRF check and the origin check (signedIn with
// write set); every other page is a GET.
func (u *UI) routes() {
	m := u.mux
	m.HandleFunc("GET /ui/static/{file...}", u.serveStatic)
	m.HandleFunc("GET /ui/login", u.loginPage)
	m.Handle("POST /ui/login", u.origin.Handler(http.HandlerFunc(u.login)))
	m.Handle("POST /ui/logout", u.signedIn(true, u.logout))

	m.Handle("GET /ui/{$}", u.signedIn(false, u.home))
	m.Handle("POST /ui/links", u.signedIn(true, u.createLink))
	m.Handle("GET /ui/links", u.signedIn(false, u.listLinks))
	m.Handle("POST /ui/links/bulk", u.signedIn(true, u.bulk))
	m.Handle("GET /ui/links/{code}", u.signedIn(false, u.linkPage))
	m.Handle("POST /ui/links/{code}", u.signedIn(true, u.updateLink))
	m.Handle("POST /ui/links/{code}/delete", u.signedIn(true, u.deleteLink))
	m.Handle("GET /ui/links/{code}/stats", u.signedIn(false, u.statsPage))
	m.Handle("GET /ui/transfer", u.signedIn(false, u.transferPage))
	// An import's CSRF token is the first part of its multipart body,
	// read by the handler before the file is streamed to the API.
	m.Handle("POST /ui/import", u.origin.Handler(u.signedIn(false, u.importLinks)))
	m.Handle("GET /ui/export", u.signedIn(false, u.export))

	m.Handle("GET /ui/admin/keys", u.signedIn(false, u.keysPage))
	m.Handle("POST /ui/admin/keys", u.signedIn(true, u.createKey))
	m.Handle("POST /ui/admin/keys/{id}/revoke", u.signedIn(true, u.revokeKey))
	m.Handle("GET /ui/admin/blocklist", u.signedIn(false, u.blocklistPage))
	m.Handle("POST /ui/admin/blocklist", u.signedIn(true, u.block))
	m.Handle("POST /ui/admin/blocklist/{domain}/remove", u.signedIn(true, u.unblock))
	m.Handle("GET /ui/admin/cluster", u.signedIn(false, u.clusterPage))

	m.HandleFunc("/ui/", u.notFound)
}

// session is a signed-in request's key and the token its forms carry.
type session struct {
	key  apikey.Key
	csrf string
}

type sessionCtx struct{}

func sessionOf(r *http.Request) *session {
	s, _ := r.Context().Value(sessionCtx{}).(*session)
	return s
}

// signedIn wraps a page that needs a session: without one (none, expired,
// forged, or its key revoked) a GET goes to the sign-in page and anything
// else is refused 401; htmx requests are told to go there (HX-Redirect),
// and a fragment's address is never the place to come back to. A failure
// to read the keys is 503, and the session stays. write marks a page that
// changes something: its form is read whole (at most maxFormBytes: 413
// past that), and it is refused 403 unless it comes from this origin and
// carries the session's CSRF token.
func (u *UI) signedIn(write bool, h http.HandlerFunc) http.Handler {
	var next http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := r.Cookie(cookieName)
		var k apikey.Key
		if err == nil {
			k, err = u.verifySession(c.Value)
		}
		if err != nil && c != nil && !errors.Is(err, errNoSession) && !errors.Is(err, errExpired) && !errors.Is(err, errRevoked) {
			u.log.Error("web ui: reading the keys failed", "err", err)
			u.errorPage(w, r, http.StatusServiceUnavailable, "Unavailable", "The node cannot check your session now: try again in a moment.")
			return
		}
		if err != nil {
			if c != nil {
				u.clearCookie(w, r)
			}
			u.toSignIn(w, r, err)
			return
		}
		s := &session{key: k, csrf: u.csrfToken(c.Value)}
		r = r.WithContext(context.WithValue(r.Context(), sessionCtx{}, s))
		if write {
			r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
			if err := r.ParseForm(); err != nil {
				var mbe *http.MaxBytesError
				if errors.As(err, &mbe) {
					u.errorPage(w, r, http.StatusRequestEntityTooLarge, "Too large", "This form is over "+strconv.Itoa(maxFormBytes>>10)+" KiB: shorten what you typed.")
					return
				}
				u.errorPage(w, r, http.StatusBadRequest, "Bad form", "The form could not be read.")
				return
			}
			if !u.validCSRF(r, s.csrf) {
				u.log.Warn("web ui: a write without its CSRF token refused", "path", r.URL.Path, "key_id", k.ID)
				u.errorPage(w, r, http.StatusForbidden, "Refused", "This form is stale or came from another site: reload the page and try again.")
				return
			}
		}
		h(w, r)
	})
	if write {
		next = u.origin.Handler(next)
	}
	return next
}

// toSignIn sends a request without a session to the sign-in page, saying
// why when its session ended.
func (u *UI) toSignIn(w http.ResponseWriter, r *http.Request, why error) {
	q := url.Values{}
	if errors.Is(why, errRevoked) {
		q.Set("why", "revoked")
	} else if errors.Is(why, errExpired) {
		q.Set("why", "expired")
	}
	htmx := r.Header.Get("HX-Request") != ""
	page := r.Method == http.MethodGet && (!htmx || r.Header.Get("HX-Boosted") != "")
	if page && r.URL.Path != "/ui/" {
		q.Set("next", r.URL.RequestURI())
	}
	target := "/ui/login"
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	switch {
	case htmx:
		// A redirect would be followed by the browser before htmx saw
		// it, and the sign-in page swapped into a fragment.
		w.Header().Set("HX-Redirect", target)
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		http.Redirect(w, r, target, http.StatusSeeOther)
	default:
		u.errorPage(w, r, http.StatusUnauthorized, "Signed out", "Your session has ended: sign in again.")
	}
}

func (u *UI) notFound(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, HEAD, POST")
		u.errorPage(w, r, http.StatusMethodNotAllowed, "Not allowed", "Pages take GET, and forms POST.")
		return
	}
	u.errorPage(w, r, http.StatusNotFound, "Not found", "There is no such page.")
}
