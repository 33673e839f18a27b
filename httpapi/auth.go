package httpapi

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// Who may call what (DESIGN section 11): every /api/v1 route needs a key
// (Authorization: Bearer) with the route's scope, except POST
// /api/v1/links with -anonymous-create; a key without admin sees only its
// owner's links, and another owner's link is answered exactly as an unknown
// code. Redirects, /healthz and /readyz stay public.

// principal is who a request acts as: a key, or an anonymous client.
type principal struct {
	key  apikey.Key
	anon bool
	ip   netip.Addr // the client address, for anonymous principals
}

func (p *principal) owner() string {
	if p.anon {
		return apikey.OwnerAnonymous
	}
	return p.key.Owner
}

func (p *principal) admin() bool { return !p.anon && p.key.Scopes&apikey.Admin != 0 }

// may reports whether p holds scope (admin keys hold every scope).
func (p *principal) may(scope apikey.Scope) bool { return !p.anon && p.key.Scopes.Has(scope) }

// owns reports whether p may see a link stored with owner.
func (p *principal) owns(owner string) bool {
	return p.admin() || (!p.anon && apikey.LinkOwner(owner) == p.key.Owner)
}

type principalKey struct{}

func principalOf(r *http.Request) *principal {
	p, _ := r.Context().Value(principalKey{}).(*principal)
	if p == nil {
		return &principal{anon: true}
	}
	return p
}

// sessionKey carries a key that in-process code has already authenticated
// (the web UI, from its signed session cookie); see AsKey.
type sessionKey struct{}

// AsKey returns ctx for a request that the API serves as key k without an
// Authorization header: the web UI (package httpapi/webui) checks its
// session cookie, looks its key up by ID, and calls the API in-process
// with this context. Nothing from the wire reaches a request's context, so
// only code in the binary can use it; scopes, ownership and k's rate limit
// apply as they do to a bearer of k.
func AsKey(ctx context.Context, k apikey.Key) context.Context {
	return context.WithValue(ctx, sessionKey{}, k)
}

var (
	errUnauthorized = &requestError{status: http.StatusUnauthorized, kind: "unauthorized", title: "Unauthorized",
		detail: "send an API key: Authorization: Bearer <key>"}
	errBadKey = &requestError{status: http.StatusUnauthorized, kind: "unauthorized", title: "Unauthorized",
		detail: "the API key is unknown or revoked"}
	errForbidden = &requestError{status: http.StatusForbidden, kind: "forbidden", title: "Forbidden",
		detail: "the API key lacks the scope this route needs"}
)

// cost is how many rate-limit tokens a route takes up front; costByBody
// routes spend theirs once the body says how many (bulk: one per link).
const costByBody = 0

// authed wraps an /api/v1 handler: the key (or, for anonymous creates, the
// client address) is checked, then the scope, then the rate limit. A
// refused request touches nothing.
func (s *Server) authed(scope apikey.Scope, cost int, anonymous bool, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := &principal{}
		auth := r.Header.Get("Authorization")
		secret, has := apikey.FromHeader(auth)
		switch {
		case auth == "" && s.fromSession(r, p):
			if !p.key.Scopes.Has(scope) {
				s.Error(w, r, errForbidden)
				return
			}
		case has:
			k, err := s.keys.Authenticate(secret)
			if err != nil {
				if !errors.Is(err, apikey.ErrUnauthorized) {
					s.Error(w, r, err)
					return
				}
				s.unauthorized(w, r, errBadKey)
				return
			}
			p.key = k
			if !k.Scopes.Has(scope) {
				s.Error(w, r, errForbidden)
				return
			}
		case auth != "":
			s.unauthorized(w, r, &requestError{status: http.StatusUnauthorized, kind: "unauthorized", title: "Unauthorized",
				detail: "the Authorization header must be Bearer <key>"})
			return
		case anonymous && s.anonymousCreate:
			p.anon, p.ip = true, s.clientIP(r) // the anonymous limit's identity
		default:
			s.unauthorized(w, r, errUnauthorized)
			return
		}
		if cost > 0 && !s.limit(w, r, p, cost) {
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	}
}

// fromSession puts the key of an in-process request made with AsKey into
// p, and reports whether there was one.
func (s *Server) fromSession(r *http.Request, p *principal) bool {
	k, ok := r.Context().Value(sessionKey{}).(apikey.Key)
	p.key = k
	return ok
}

func (s *Server) unauthorized(w http.ResponseWriter, r *http.Request, e *requestError) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="linkraft"`)
	s.Error(w, r, e)
}

// checkOwner answers link.ErrNotFound (as for an unknown code) when the
// request's key may not see code's link; admin keys skip the lookup. It
// reads the link the way a redirect does (Resolve: the local replica or
// cache, the shard's leader on a miss): a code's owner never changes and a
// code is never made twice, so any copy of the link answers right.
// Tombstones pass: the route's own call answers for them.
func (s *Server) checkOwner(r *http.Request, code string) error {
	p := principalOf(r)
	if p.admin() {
		return nil
	}
	l, err := s.links.Resolve(r.Context(), code)
	if err != nil {
		return err
	}
	if !p.owns(l.Owner) {
		return link.ErrNotFound
	}
	return nil
}

func (s *Server) registerKeyRoutes(r *mux.Router) {
	r.HandleFunc("/api/v1/keys", s.measured("/api/v1/keys", s.authed(apikey.Admin, 1, false, s.handleCreateKey))).Methods(http.MethodPost)
	r.HandleFunc("/api/v1/keys", s.measured("/api/v1/keys", s.authed(apikey.Admin, 1, false, s.handleListKeys))).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/api/v1/keys/{id}", s.measured("/api/v1/keys/{id}", s.authed(apikey.Admin, 1, false, s.handleRevokeKey))).Methods(http.MethodDelete)
	r.HandleFunc("/api/v1/blocklist", s.measured("/api/v1/blocklist", s.authed(apikey.Admin, 1, false, s.handleBlock))).Methods(http.MethodPost)
	r.HandleFunc("/api/v1/blocklist", s.measured("/api/v1/blocklist", s.authed(apikey.Admin, 1, false, s.handleListBlocked))).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/api/v1/blocklist/{domain}", s.measured("/api/v1/blocklist/{domain}", s.authed(apikey.Admin, 1, false, s.handleUnblock))).Methods(http.MethodDelete)
}

// keyJSON is a key as the API shows it; Key (the secret) only in the
// answer to its creation.
type keyJSON struct {
	ID        string    `json:"id"`
	Key       string    `json:"key,omitempty"`
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	Scopes    []string  `json:"scopes"`
	RateLimit *uint32   `json:"rate_limit"`
	CreatedAt time.Time `json:"created_at"`
}

func toKeyJSON(k apikey.Key, secret string) keyJSON {
	out := keyJSON{ID: k.ID, Key: secret, Name: k.Name, Owner: k.Owner, Scopes: k.Scopes.Names(), CreatedAt: k.CreatedAt.UTC()}
	if k.RateLimit > 0 {
		rl := k.RateLimit
		out.RateLimit = &rl
	}
	return out
}

// createKeyBody is POST /api/v1/keys.
type createKeyBody struct {
	Name      *string  `json:"name"`
	Owner     *string  `json:"owner"`
	Scopes    []string `json:"scopes"`
	RateLimit *uint32  `json:"rate_limit"`
}

// maxKeyRate bounds a key's own rate limit (requests per second).
const maxKeyRate = 100000

// handleCreateKey serves POST /api/v1/keys (admin): 201 with the secret,
// shown this once.
func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	var b createKeyBody
	if err := s.readJSON(w, r, &b); err != nil {
		s.Error(w, r, err)
		return
	}
	keyField := func(name string, err error) error {
		return field(name, strings.TrimPrefix(err.Error(), apikey.ErrInvalid.Error()+": "), link.ErrInvalidInput)
	}
	var req apikey.Request
	if b.Name == nil {
		s.Error(w, r, field("name", "is required", link.ErrInvalidInput))
		return
	}
	if err := apikey.ValidName("name", *b.Name); err != nil {
		s.Error(w, r, keyField("name", err))
		return
	}
	if b.Owner == nil {
		s.Error(w, r, field("owner", "is required: whose links the key manages", link.ErrInvalidInput))
		return
	}
	if err := apikey.ValidName("owner", *b.Owner); err != nil {
		s.Error(w, r, keyField("owner", err))
		return
	}
	if *b.Owner == apikey.OwnerAnonymous {
		s.Error(w, r, field("owner", "anonymous is the owner of keyless links, not of a key", link.ErrInvalidInput))
		return
	}
	scopes, err := apikey.ParseScopes(b.Scopes)
	if err != nil {
		s.Error(w, r, keyField("scopes", err))
		return
	}
	req.Name, req.Owner, req.Scopes = *b.Name, *b.Owner, scopes
	if b.RateLimit != nil {
		if *b.RateLimit < 1 || *b.RateLimit > maxKeyRate {
			s.Error(w, r, field("rate_limit", "must be 1 to "+strconv.Itoa(maxKeyRate)+" requests per second", link.ErrInvalidInput))
			return
		}
		req.RateLimit = *b.RateLimit
	}
	secret, k, err := s.keys.Create(r.Context(), req)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/keys/"+k.ID)
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusCreated, toKeyJSON(k, secret))
}

// handleListKeys serves GET /api/v1/keys (admin): every key, no secrets.
func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	keys, err := s.keys.List()
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := make([]keyJSON, 0, len(keys))
	for _, k := range keys {
		out = append(out, toKeyJSON(k, ""))
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]any{"keys": out})
}

// handleRevokeKey serves DELETE /api/v1/keys/{id} (admin): 204; every node
// refuses the key once it applies the revocation.
func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	err := s.keys.Revoke(r.Context(), mux.Vars(r)["id"])
	if errors.Is(err, apikey.ErrNotFound) {
		s.problem(w, r, http.StatusNotFound, "not-found", "Not Found", "no key has this ID")
		return
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// blockBody is POST /api/v1/blocklist.
type blockBody struct {
	Domain *string `json:"domain"`
}

// canonicalDomain checks a blocklist domain the way destinations are
// normalised, so that what is blocked is what links hold.
func (s *Server) canonicalDomain(d string) (string, error) {
	u, err := link.URLPolicy{AllowPrivate: true}.NormalizeURL("https://" + strings.TrimSuffix(d, ".") + "/")
	if err != nil || strings.ContainsAny(d, "/:@?#") {
		return "", field("domain", "must be a domain name such as evil.example", link.ErrInvalidInput)
	}
	return strings.TrimSuffix(strings.TrimPrefix(u, "https://"), "/"), nil
}

// handleBlock serves POST /api/v1/blocklist (admin): the domain and its
// subdomains are refused as destinations, and links to them answer 410,
// on every node once it applies the entry.
func (s *Server) handleBlock(w http.ResponseWriter, r *http.Request) {
	var b blockBody
	if err := s.readJSON(w, r, &b); err != nil {
		s.Error(w, r, err)
		return
	}
	if b.Domain == nil {
		s.Error(w, r, field("domain", "is required", link.ErrInvalidInput))
		return
	}
	d, err := s.canonicalDomain(*b.Domain)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.keys.SetBlocked(r.Context(), d, true); err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusCreated, map[string]any{"domain": d})
}

// handleListBlocked serves GET /api/v1/blocklist (admin).
func (s *Server) handleListBlocked(w http.ResponseWriter, r *http.Request) {
	bl, err := s.keys.Blocklist()
	if err != nil {
		s.Error(w, r, err)
		return
	}
	type row struct {
		Domain    string    `json:"domain"`
		BlockedAt time.Time `json:"blocked_at"`
	}
	out := make([]row, 0, len(bl))
	for d, at := range bl {
		out = append(out, row{d, at.UTC()})
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.Domain, b.Domain) })
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, r, http.StatusOK, map[string]any{"domains": out})
}

// handleUnblock serves DELETE /api/v1/blocklist/{domain} (admin): 204, or
// 404 for a domain not on the list.
func (s *Server) handleUnblock(w http.ResponseWriter, r *http.Request) {
	d, err := s.canonicalDomain(mux.Vars(r)["domain"])
	if err != nil {
		s.Error(w, r, err)
		return
	}
	bl, err := s.keys.Blocklist()
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if _, ok := bl[d]; !ok {
		s.problem(w, r, http.StatusNotFound, "not-found", "Not Found", "the domain is not on the blocklist")
		return
	}
	if err := s.keys.SetBlocked(r.Context(), d, false); err != nil {
		s.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
