package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/link"
)

// linkJSON is a link as the API shows it (DESIGN section 10).
type linkJSON struct {
	Code     string `json:"code"`
	ShortURL string `json:"short_url"`
	// QRURL is the link's QR code (GET /{code}/qr).
	QRURL string `json:"qr_url"`
	URL   string `json:"url"`
	// Title and Description are the owner's words ("" when unset).
	Title       string `json:"title"`
	Description string `json:"description"`
	// Note is the owner's private note ("" when unset), never shown to
	// visitors.
	Note      string     `json:"note"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	Redirect  int        `json:"redirect"`
	Disabled  bool       `json:"disabled"`
	Tags      []string   `json:"tags"`
	MaxVisits *uint64    `json:"max_visits"`
	// ForwardQuery: the redirect adds the request's query to the URL's.
	ForwardQuery bool `json:"forward_query"`
	// PasswordProtected: the redirect asks for a password first (the
	// password and its hash are never shown).
	PasswordProtected bool `json:"password_protected"`
	// Rules send the visitors they match elsewhere (first match wins).
	Rules []ruleJSON `json:"rules"`
	// Clicks counts human visits (GET /api/v1/links/{code} reads it; a
	// new link has none); a listing leaves it out.
	Clicks *uint64 `json:"clicks,omitempty"`
	// Owner is whose link it is (the owner of the key that made it).
	Owner string `json:"owner"`
	// Blocked is set when the destination's domain is on the cluster's
	// blocklist: the link answers 410 (a takedown).
	Blocked bool `json:"blocked"`
}

// ruleJSON is a redirect rule as the API shows and takes it.
type ruleJSON struct {
	Device   string `json:"device,omitempty"`
	Country  string `json:"country,omitempty"`
	Language string `json:"language,omitempty"`
	URL      string `json:"url"`
}

func rulesFromJSON(in []ruleJSON) []link.Rule {
	if len(in) == 0 {
		return nil
	}
	out := make([]link.Rule, len(in))
	for i, r := range in {
		out[i] = link.Rule(r)
	}
	return out
}

func (s *Server) toJSON(l *link.Link) linkJSON {
	out := linkJSON{
		Code: l.Code, ShortURL: s.publicURL + "/" + l.Code, QRURL: s.publicURL + "/" + l.Code + "/qr", URL: l.URL,
		Title: l.Title, Description: l.Description, Note: l.Note,
		CreatedAt: l.CreatedAt.UTC(), UpdatedAt: l.UpdatedAt.UTC(),
		Redirect: l.Redirect, Disabled: l.Disabled, Tags: l.Tags, ForwardQuery: !l.DropQuery,
		PasswordProtected: l.PasswordHash != "",
		Owner:             apikey.LinkOwner(l.Owner), Blocked: s.blocked(l),
	}
	if !l.ExpiresAt.IsZero() {
		e := l.ExpiresAt.UTC()
		out.ExpiresAt = &e
	}
	if out.Tags == nil {
		out.Tags = []string{}
	}
	out.Rules = make([]ruleJSON, len(l.Rules))
	for i, r := range l.Rules {
		out.Rules[i] = ruleJSON(r)
	}
	if l.MaxVisits > 0 {
		mv := l.MaxVisits
		out.MaxVisits = &mv
	}
	out.Clicks = new(uint64)
	return out
}

func (s *Server) registerLinkRoutes() {
	r := s.router
	r.HandleFunc("/api/v1/links", s.measured("/api/v1/links", s.authed(apikey.LinksWrite, 1, true, s.handleCreate))).Methods(http.MethodPost)
	r.HandleFunc("/api/v1/links", s.measured("/api/v1/links", s.authed(apikey.LinksRead, 1, false, s.handleList))).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/api/v1/tags", s.measured("/api/v1/tags", s.authed(apikey.LinksRead, 1, false, s.handleTags))).Methods(http.MethodGet, http.MethodHead)
	// Before /api/v1/links/{code}: these are reserved words, never codes,
	// and their other methods are 405 (fixedRoute).
	s.fixedRoute("/api/v1/links/export", s.measured("/api/v1/links/export", s.authed(apikey.LinksRead, exportCost, false, s.handleExport)), http.MethodGet, http.MethodHead)
	s.fixedRoute("/api/v1/links/bulk-update", s.measured("/api/v1/links/bulk-update", s.authed(apikey.LinksWrite, costByBody, false, s.handleBulkUpdate)), http.MethodPost)
	s.fixedRoute("/api/v1/links/bulk-delete", s.measured("/api/v1/links/bulk-delete", s.authed(apikey.LinksWrite, costByBody, false, s.handleBulkDelete)), http.MethodPost)
	s.fixedRoute("/api/v1/links/import", s.measured("/api/v1/links/import", s.authed(apikey.LinksWrite, costByBody, false, s.handleImport)), http.MethodPost)
	s.fixedRoute("/api/v1/links/bulk", s.measured("/api/v1/links/bulk", s.authed(apikey.LinksWrite, costByBody, false, s.handleBulkCreate)), http.MethodPost)
	r.HandleFunc("/api/v1/links/{code}", s.measured("/api/v1/links/{code}", s.authed(apikey.LinksRead, 1, false, s.handleGet))).Methods(http.MethodGet, http.MethodHead)
	r.HandleFunc("/api/v1/links/{code}", s.measured("/api/v1/links/{code}", s.authed(apikey.LinksWrite, 1, false, s.handlePatch))).Methods(http.MethodPatch)
	r.HandleFunc("/api/v1/links/{code}", s.measured("/api/v1/links/{code}", s.authed(apikey.LinksWrite, 1, false, s.handleDelete))).Methods(http.MethodDelete)
}

// createBody is POST /api/v1/links.
type createBody struct {
	URL       *string  `json:"url"`
	Alias     *string  `json:"alias"`
	ExpiresAt *string  `json:"expires_at"`
	TTL       *int64   `json:"ttl"`
	Redirect  *int     `json:"redirect"`
	Tags      []string `json:"tags"`
	MaxVisits *uint64  `json:"max_visits"`
	// ForwardQuery (default true) adds the request's query to the URL's.
	ForwardQuery *bool   `json:"forward_query"`
	Title        *string `json:"title"`
	Description  *string `json:"description"`
	Note         *string `json:"note"`
	// Password (1 to 128 bytes) makes the redirect ask for it; only its
	// argon2id hash is stored.
	Password *string `json:"password"`
	// Rules: at most link.MaxRules.
	Rules []ruleJSON `json:"rules"`
}

func field(name, reason string, sentinel error) error {
	return &link.FieldError{Err: sentinel, Field: name, Reason: reason}
}

// parseExpiry reads an RFC 3339 expiry (link.CreateRequest.Validate checks
// that it lies in the future).
func parseExpiry(raw string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}, field("expires_at", "must be an RFC 3339 time such as 2030-01-02T15:04:05Z", link.ErrInvalidInput)
	}
	return t, nil
}

// validateCreate reads a create body into a request and validates it
// (link.CreateRequest.Validate); what is checked here is only the JSON's
// form: ttl, and max_visits given as 0.
func (s *Server) validateCreate(b *createBody) (link.CreateRequest, error) {
	var req link.CreateRequest
	if b.URL != nil {
		req.URL = *b.URL
		if req.URL == "" {
			return req, field("url", "is required", link.ErrInvalidURL)
		}
	}
	if b.Alias != nil {
		req.Alias = *b.Alias
		if req.Alias == "" {
			return req, link.ValidateAlias("")
		}
	}
	if b.ExpiresAt != nil && b.TTL != nil {
		return req, field("ttl", "give either expires_at or ttl, not both", link.ErrInvalidInput)
	}
	if b.ExpiresAt != nil {
		var err error
		if req.ExpiresAt, err = parseExpiry(*b.ExpiresAt); err != nil {
			return req, err
		}
	}
	if b.TTL != nil {
		if *b.TTL <= 0 || time.Duration(*b.TTL)*time.Second > link.MaxTTL || *b.TTL > int64(link.MaxTTL/time.Second) {
			return req, field("ttl", "must be a positive number of seconds, at most 100 years", link.ErrInvalidInput)
		}
		req.ExpiresAt = s.now().Add(time.Duration(*b.TTL) * time.Second)
	}
	if b.Redirect != nil {
		if req.Redirect = *b.Redirect; req.Redirect == 0 {
			return req, link.ErrBadRedirect
		}
	}
	req.Tags = b.Tags
	if b.MaxVisits != nil {
		if *b.MaxVisits < 1 {
			return req, field("max_visits", "must be 1 to "+strconv.FormatUint(link.MaxVisitsLimit, 10), link.ErrInvalidInput)
		}
		req.MaxVisits = *b.MaxVisits
	}
	req.DropQuery = b.ForwardQuery != nil && !*b.ForwardQuery
	if b.Title != nil {
		req.Title = *b.Title
	}
	if b.Description != nil {
		req.Description = *b.Description
	}
	if b.Note != nil {
		req.Note = *b.Note
	}
	if b.Password != nil {
		if err := checkNewPassword(*b.Password); err != nil {
			return req, err
		}
	}
	req.Rules = rulesFromJSON(b.Rules)
	return req, req.Validate(s.policy, s.now())
}

// handleCreate serves POST /api/v1/links.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	key, raw, err := idempotent(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	once := raw != nil
	var b createBody
	if err := s.readJSON(w, r, &b); err != nil {
		s.Error(w, r, err)
		return
	}
	req, err := s.validateCreate(&b)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	p := principalOf(r)
	req.Owner = p.owner()
	if once && b.Password != nil {
		s.Error(w, r, errIdempotencyPassword)
		return
	}
	if b.Password != nil {
		if req.PasswordHash, err = s.hashPassword(r.Context(), *b.Password); err != nil {
			s.Error(w, r, err)
			return
		}
	}
	var l *link.Link
	if once {
		var replayed bool
		l, replayed, err = s.links.CreateOnce(r.Context(), req, idempotencyOf(p, key, raw.Bytes()))
		markReplayed(w, replayed)
	} else {
		l, err = s.links.Create(r.Context(), req)
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	w.Header().Set("Location", "/api/v1/links/"+l.Code)
	writeJSON(w, r, http.StatusCreated, s.toJSON(l))
}

// codeVar returns the {code} path variable, or a 404 for strings that cannot
// be a code.
func codeVar(r *http.Request) (string, error) {
	code := mux.Vars(r)["code"]
	if !link.ValidCode(code) {
		return "", link.ErrNotFound
	}
	return code, nil
}

// handleGet serves GET /api/v1/links/{code}[?consistent=true].
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	consistent := false
	if v := r.URL.Query().Get("consistent"); v != "" {
		consistent, err = strconv.ParseBool(v)
		if err != nil {
			s.Error(w, r, field("consistent", "must be true or false", link.ErrInvalidInput))
			return
		}
	}
	l, err := s.links.Get(r.Context(), code, consistent)
	switch {
	case err != nil:
	case !principalOf(r).owns(l.Owner):
		err = link.ErrNotFound // another owner's link is no link to this key
	case l.Deleted:
		err = link.ErrDeleted
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	out := s.toJSON(l)
	// clicks: human visits so far (the replicated counter; it trails the
	// redirects by about a flush interval), for keys that may read stats.
	if !principalOf(r).may(apikey.StatsRead) {
		out.Clicks = nil
	} else if n, err := s.analytics.ClickCount(r.Context(), code); err == nil {
		out.Clicks = &n
	}
	writeJSON(w, r, http.StatusOK, out)
}

// patchFields are the members a PATCH may hold.
var patchFields = map[string]bool{"url": true, "expires_at": true, "redirect": true, "disabled": true, "tags": true, "forward_query": true, "title": true, "description": true, "note": true, "password": true, "rules": true}

// handlePatch serves PATCH /api/v1/links/{code}: a JSON merge patch of
// {url, expires_at, redirect, disabled, tags}. expires_at: null removes the
// expiry, tags: null removes the tags.
func (s *Server) handlePatch(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	var raw map[string]json.RawMessage
	if err := s.readJSON(w, r, &raw); err != nil {
		s.Error(w, r, err)
		return
	}
	if raw == nil {
		s.Error(w, r, badRequest("malformed-json", "the body must be a JSON object"))
		return
	}
	p, pw, err := s.validatePatch(raw)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.checkOwner(r, code); err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.hashPatchPassword(r.Context(), &p, pw); err != nil {
		s.Error(w, r, err)
		return
	}
	var l *link.Link
	if p.Empty() {
		// An empty merge patch changes nothing.
		if l, err = s.links.Get(r.Context(), code, false); err == nil && l.Deleted {
			err = link.ErrDeleted
		}
	} else {
		l, err = s.links.Update(r.Context(), code, p)
	}
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if !principalOf(r).may(apikey.LinksRead) {
		writeJSON(w, r, http.StatusOK, writtenOnly(s.toJSON(l), raw))
		return
	}
	writeJSON(w, r, http.StatusOK, s.toJSON(l))
}

// writtenOnly is what a key that may write links but not read them gets
// back from an update: the link's names, when it changed, and the fields
// it wrote, not the rest of the record (issue 26).
func writtenOnly(j linkJSON, wrote map[string]json.RawMessage) map[string]any {
	b, _ := json.Marshal(j)
	var all map[string]any
	_ = json.Unmarshal(b, &all)
	out := map[string]any{}
	for _, k := range []string{"code", "short_url", "qr_url", "updated_at"} {
		out[k] = all[k]
	}
	for k := range wrote {
		if k == "password" {
			k = "password_protected"
		}
		if v, ok := all[k]; ok {
			out[k] = v
		}
	}
	return out
}

func isNull(m json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(m), []byte("null")) }

func decodeField(name string, m json.RawMessage, v any, kind string) error {
	if err := json.Unmarshal(m, v); err != nil {
		return field(name, "must be "+kind, link.ErrInvalidInput)
	}
	return nil
}

// patchValue decodes member name of a patch, nil if absent; null, which
// would remove a value that cannot be removed, is answered with ifNull.
func patchValue[T any](raw map[string]json.RawMessage, name, kind string, ifNull error) (*T, error) {
	m, ok := raw[name]
	if !ok {
		return nil, nil
	}
	if isNull(m) {
		return nil, ifNull
	}
	var v T
	if err := decodeField(name, m, &v, kind); err != nil {
		return nil, err
	}
	return &v, nil
}

// validatePatch reads a merge patch; the password, if the patch sets it,
// comes back apart ("" removes it), for hashPatchPassword to hash.
func (s *Server) validatePatch(raw map[string]json.RawMessage) (link.Patch, *string, error) {
	p, err := s.readPatch(raw)
	if err != nil {
		return p, nil, err
	}
	m, ok := raw["password"]
	if !ok {
		return p, nil, nil
	}
	pw := "" // null removes it, as ""
	if !isNull(m) {
		if err := decodeField("password", m, &pw, "a string or null"); err != nil {
			return p, nil, err
		}
		if pw != "" {
			if err := checkNewPassword(pw); err != nil {
				return p, nil, err
			}
		}
	}
	return p, &pw, nil
}

// hashPatchPassword sets p's password hash for pw, the password
// validatePatch returned (nil: the patch leaves it alone).
func (s *Server) hashPatchPassword(ctx context.Context, p *link.Patch, pw *string) error {
	if pw == nil {
		return nil
	}
	h, err := s.hashPassword(ctx, *pw)
	if err != nil {
		return err
	}
	p.PasswordHash = &h
	return nil
}

func (s *Server) readPatch(raw map[string]json.RawMessage) (link.Patch, error) {
	var p link.Patch
	for k := range raw {
		if !patchFields[k] {
			re := badRequest("unknown-field", fmt.Sprintf("unknown field %q (a patch may set %s)", k, strings.Join(slices.Sorted(maps.Keys(patchFields)), ", "))).(*requestError)
			re.field = k
			return p, re
		}
	}
	var err error
	if p.URL, err = patchValue[string](raw, "url", "a string", field("url", "cannot be removed", link.ErrInvalidURL)); err != nil {
		return p, err
	}
	if m, ok := raw["expires_at"]; ok {
		var t time.Time
		if !isNull(m) {
			var str string
			if err := decodeField("expires_at", m, &str, "an RFC 3339 time or null"); err != nil {
				return p, err
			}
			if t, err = parseExpiry(str); err != nil {
				return p, err
			}
		}
		p.ExpiresAt = &t
	}
	if p.Redirect, err = patchValue[int](raw, "redirect", "an integer", link.ErrBadRedirect); err != nil {
		return p, err
	}
	if p.Disabled, err = patchValue[bool](raw, "disabled", "true or false", field("disabled", "must be true or false", link.ErrInvalidInput)); err != nil {
		return p, err
	}
	if m, ok := raw["tags"]; ok {
		tags := []string{}
		if !isNull(m) {
			if err := decodeField("tags", m, &tags, "an array of strings"); err != nil {
				return p, err
			}
		}
		p.Tags = &tags
	}
	if m, ok := raw["rules"]; ok {
		var in []ruleJSON // null removes them, as []
		if !isNull(m) {
			dec := json.NewDecoder(bytes.NewReader(m))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&in); err != nil {
				return p, field("rules", "must be an array of {device, country, language, url}", link.ErrInvalidInput)
			}
		}
		rules := rulesFromJSON(in)
		p.Rules = &rules
	}
	forward, err := patchValue[bool](raw, "forward_query", "true or false", field("forward_query", "must be true or false", link.ErrInvalidInput))
	if err != nil {
		return p, err
	}
	if forward != nil {
		drop := !*forward
		p.DropQuery = &drop
	}
	for _, t := range []struct {
		name string
		dst  **string
	}{{"title", &p.Title}, {"description", &p.Description}, {"note", &p.Note}} {
		if m, ok := raw[t.name]; ok {
			v := "" // null removes it, as ""
			if !isNull(m) {
				if err := decodeField(t.name, m, &v, "a string or null"); err != nil {
					return p, err
				}
			}
			*t.dst = &v
		}
	}
	return p, p.Validate(s.policy, s.now())
}

// handleDelete serves DELETE /api/v1/links/{code}.
func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	code, err := codeVar(r)
	if err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.checkOwner(r, code); err != nil {
		s.Error(w, r, err)
		return
	}
	if err := s.links.Delete(r.Context(), code); err != nil {
		s.Error(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
