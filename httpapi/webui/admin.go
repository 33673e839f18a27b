package webui

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/status"
)

// The admin pages need an admin key: the API refuses every call of
// another key, and the page says so.

type keyView struct {
	ID        string    `json:"id"`
	Key       string    `json:"key"`
	Name      string    `json:"name"`
	Owner     string    `json:"owner"`
	Scopes    []string  `json:"scopes"`
	RateLimit *uint32   `json:"rate_limit"`
	CreatedAt time.Time `json:"created_at"`
}

type keysData struct {
	Keys []keyView
	Form *form
	// Made is a key just created: its secret is shown this once.
	Made *keyView
	// Revoked names a key just revoked.
	Revoked string
}

// keysPage serves GET /ui/admin/keys.
func (u *UI) keysPage(w http.ResponseWriter, r *http.Request) {
	d := &keysData{Form: &form{Values: url.Values{"scopes": {"links:read", "links:write", "stats:read"}}}}
	if id := r.URL.Query().Get("revoked"); apikey.ValidID(id) {
		d.Revoked = id
	}
	u.renderKeys(w, r, http.StatusOK, d)
}

func (u *UI) renderKeys(w http.ResponseWriter, r *http.Request, status int, d *keysData) {
	var list struct {
		Keys []keyView `json:"keys"`
	}
	if err := call(u.api, r, http.MethodGet, "/api/v1/keys", nil, &list); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	d.Keys = list.Keys
	flash := ""
	if d.Revoked != "" {
		flash = "Key " + d.Revoked + " revoked."
	}
	u.render(w, r, status, "keys", view{Title: "API keys", Nav: "keys", Flash: flash, Data: d, Push: "/ui/admin/keys"})
}

// HasScope reports whether the form has scope ticked.
func (f *form) HasScope(scope string) bool {
	if f == nil {
		return false
	}
	for _, s := range f.Values["scopes"] {
		if s == scope {
			return true
		}
	}
	return false
}

// createKey serves POST /ui/admin/keys: the new key's secret is shown on
// the answer, once, and is not kept.
func (u *UI) createKey(w http.ResponseWriter, r *http.Request) {
	f := &form{Values: r.PostForm}
	body := map[string]any{"name": strings.TrimSpace(f.Get("name")), "owner": strings.TrimSpace(f.Get("owner")), "scopes": append([]string{}, f.Values["scopes"]...)}
	if s := strings.TrimSpace(f.Get("rate_limit")); s != "" {
		n, err := strconv.ParseUint(s, 10, 32)
		if err != nil {
			f.fail("rate_limit", "must be a whole number of requests a second")
		}
		body["rate_limit"] = n
	}
	var made keyView
	if !f.failed() {
		if err := call(u.api, r, http.MethodPost, "/api/v1/keys", body, &made); err != nil {
			f.place(err, "name", "owner", "scopes", "rate_limit")
		}
	}
	if f.failed() {
		u.renderKeys(w, r, http.StatusUnprocessableEntity, &keysData{Form: f})
		return
	}
	u.renderKeys(w, r, http.StatusCreated, &keysData{Made: &made, Form: &form{Values: url.Values{"scopes": {"links:read", "links:write", "stats:read"}}}})
}

// revokeKey serves POST /ui/admin/keys/{id}/revoke.
func (u *UI) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !apikey.ValidID(id) {
		u.notFound(w, r)
		return
	}
	if err := call(u.api, r, http.MethodDelete, "/api/v1/keys/"+url.PathEscape(id), nil, nil); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	if id == sessionOf(r).key.ID {
		u.clearCookie(w, r)
		http.Redirect(w, r, "/ui/login?why=revoked", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/ui/admin/keys?"+url.Values{"revoked": {id}}.Encode(), http.StatusSeeOther)
}

type blockedView struct {
	Domain string
	Since  time.Time
}

type blocklistData struct {
	Domains []blockedView
	Form    *form
}

// blocklistPage serves GET /ui/admin/blocklist.
func (u *UI) blocklistPage(w http.ResponseWriter, r *http.Request) {
	u.renderBlocklist(w, r, http.StatusOK, &form{}, "")
}

func (u *UI) renderBlocklist(w http.ResponseWriter, r *http.Request, status int, f *form, flash string) {
	var list struct {
		Domains []struct {
			Domain    string    `json:"domain"`
			BlockedAt time.Time `json:"blocked_at"`
		} `json:"domains"`
	}
	if err := call(u.api, r, http.MethodGet, "/api/v1/blocklist", nil, &list); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	d := &blocklistData{Form: f}
	for _, b := range list.Domains {
		d.Domains = append(d.Domains, blockedView{Domain: b.Domain, Since: b.BlockedAt})
	}
	u.render(w, r, status, "blocklist", view{Title: "Blocklist", Nav: "blocklist", Flash: flash, Data: d, Push: "/ui/admin/blocklist"})
}

// block serves POST /ui/admin/blocklist.
func (u *UI) block(w http.ResponseWriter, r *http.Request) {
	f := &form{Values: r.PostForm}
	dom := strings.TrimSpace(f.Get("domain"))
	if err := call(u.api, r, http.MethodPost, "/api/v1/blocklist", map[string]any{"domain": dom}, nil); err != nil {
		f.place(err, "domain")
		u.renderBlocklist(w, r, http.StatusUnprocessableEntity, f, "")
		return
	}
	u.renderBlocklist(w, r, http.StatusOK, &form{}, "Blocked "+dom+": its links no longer redirect.")
}

// unblock serves POST /ui/admin/blocklist/{domain}/remove.
func (u *UI) unblock(w http.ResponseWriter, r *http.Request) {
	dom := r.PathValue("domain")
	if dom == "" || len(dom) > 253 || strings.ContainsAny(dom, "/?#%\\ ") {
		u.notFound(w, r)
		return
	}
	if err := call(u.api, r, http.MethodDelete, "/api/v1/blocklist/"+url.PathEscape(dom), nil, nil); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	u.renderBlocklist(w, r, http.StatusOK, &form{}, "Unblocked "+dom+".")
}

type clusterData struct {
	Status status.Cluster
	// Alive counts the nodes gossip sees.
	Alive int
}

// Lag is how far a group's applied index trails its commit index.
func (clusterData) Lag(g status.Group) uint64 {
	if g.CommitIndex < g.AppliedIndex {
		return 0
	}
	return g.CommitIndex - g.AppliedIndex
}

// clusterPage serves GET /ui/admin/cluster: the nodes, the meta group and
// every shard as this node sees them, refreshed every few seconds (htmx
// asks for the part alone: ?part=1).
func (u *UI) clusterPage(w http.ResponseWriter, r *http.Request) {
	if u.admin == nil {
		u.errorPage(w, r, http.StatusNotFound, "No cluster view", "This node serves no admin API.")
		return
	}
	d := &clusterData{}
	if err := call(u.admin, r, http.MethodGet, "/admin/v1/cluster", nil, &d.Status); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	for _, n := range d.Status.Nodes {
		if n.Status == "alive" {
			d.Alive++
		}
	}
	page := "cluster"
	if r.URL.Query().Get("part") == "1" {
		page = "clusterpart"
	}
	u.render(w, r, http.StatusOK, page, view{Title: "Cluster", Nav: "cluster", Data: d})
}
