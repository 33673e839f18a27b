package webui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/link"
)

// linkView is a link as the API answers it.
type linkView struct {
	Code              string     `json:"code"`
	ShortURL          string     `json:"short_url"`
	QRURL             string     `json:"qr_url"`
	URL               string     `json:"url"`
	Title             string     `json:"title"`
	Description       string     `json:"description"`
	Note              string     `json:"note"`
	CreatedAt         time.Time  `json:"created_at"`
	UpdatedAt         time.Time  `json:"updated_at"`
	ExpiresAt         *time.Time `json:"expires_at"`
	Redirect          int        `json:"redirect"`
	Disabled          bool       `json:"disabled"`
	Tags              []string   `json:"tags"`
	MaxVisits         *int       `json:"max_visits"`
	ForwardQuery      bool       `json:"forward_query"`
	PasswordProtected bool       `json:"password_protected"`
	Rules             []ruleView `json:"rules"`
	Clicks            *uint64    `json:"clicks"`
	Owner             string     `json:"owner"`
	Blocked           bool       `json:"blocked"`
}

// Expired reports whether the link's expiry has passed.
func (l linkView) Expired() bool { return l.ExpiresAt != nil && !l.ExpiresAt.After(time.Now()) }

// RulesText is the link's rules in the form's one-rule-a-line syntax.
func (l linkView) RulesText() string { return formatRules(l.Rules) }

// ExpiresInput is the expiry as a datetime-local value (UTC).
func (l linkView) ExpiresInput() string {
	if l.ExpiresAt == nil {
		return ""
	}
	return l.ExpiresAt.UTC().Format("2006-01-02T15:04")
}

// ruleView is a redirect rule.
type ruleView struct {
	Device   string `json:"device,omitempty"`
	Country  string `json:"country,omitempty"`
	Language string `json:"language,omitempty"`
	URL      string `json:"url"`
}

// form is a form's values and what was wrong with them, by field.
type form struct {
	Values url.Values
	Errors map[string]string
	// General is an error that belongs to no one field.
	General string
	// ruleLines are the rules field's line numbers of the rules sent.
	ruleLines []int
}

// Get is a field's value as the user sent it.
func (f *form) Get(name string) string {
	if f == nil || f.Values == nil {
		return ""
	}
	return f.Values.Get(name)
}

// Err is a field's error.
func (f *form) Err(name string) string {
	if f == nil {
		return ""
	}
	return f.Errors[name]
}

func (f *form) fail(name, msg string) {
	if f.Errors == nil {
		f.Errors = map[string]string{}
	}
	if _, done := f.Errors[name]; !done {
		f.Errors[name] = msg
	}
}

// failed reports whether any field is wrong.
func (f *form) failed() bool { return len(f.Errors) > 0 || f.General != "" }

// place puts an API problem beside the field it names (rules[2].url is
// the rules field) or, when it names none of fields, above the form.
func (f *form) place(err error, fields ...string) {
	var p *problem
	if !errors.As(err, &p) {
		f.General = "The node could not do this: try again."
		return
	}
	name := p.Field
	if i := strings.IndexAny(name, "[."); i >= 0 {
		name = name[:i]
	}
	if name == "ttl" {
		name = "expires_at"
	}
	if name == "" && p.Status == http.StatusConflict && f.Get("alias") != "" {
		name = "alias" // the only conflict a form can cause: an alias taken
	}
	for _, fl := range fields {
		if fl == name {
			// The API's detail may start with the field's name: the
			// form shows it beside the field already. A rule is named
			// by its line.
			msg := strings.TrimPrefix(p.Error(), p.Field+": ")
			var i int
			if _, err := fmt.Sscanf(p.Field, "rules[%d]", &i); err == nil && i >= 0 && i < len(f.ruleLines) {
				msg = "line " + strconv.Itoa(f.ruleLines[i]) + ": " + msg
			}
			f.fail(name, msg)
			return
		}
	}
	f.General = p.Error()
}

// formProblem reports whether err is the API's answer to what a form
// said (400, 409, 413, 422), to be shown beside the form; anything else
// (403, 404, 429, 503, a failure) is a page of its own.
func formProblem(err error) bool {
	var p *problem
	if !errors.As(err, &p) {
		return false
	}
	switch p.Status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		return true
	}
	return false
}

// createFields are the shorten form's fields, in the order the API's
// problems may name them.
var createFields = []string{"url", "alias", "expires_at", "tags", "redirect", "max_visits", "password", "rules", "title", "description", "note", "forward_query"}

// linkBody reads the shorten or edit form into an API body. create leaves
// out what is empty; an edit sends every field, null for an empty one, so
// that clearing a field clears it.
func linkBody(f *form, create bool) map[string]any {
	v := f.Values
	// A form posted without script sends a text area's lines with CRLF;
	// the API keeps text as LF.
	for _, name := range []string{"title", "description", "note", "rules"} {
		if x, ok := v[name]; ok && len(x) > 0 {
			v.Set(name, strings.ReplaceAll(x[0], "\r\n", "\n"))
		}
	}
	b := map[string]any{}
	text := func(name string) {
		s := strings.TrimSpace(v.Get(name))
		switch {
		case s != "":
			b[name] = s
		case !create:
			b[name] = nil
		}
	}
	text("url")
	if create {
		text("alias")
	}
	if !create && v.Has("expires_was") && v.Get("expires_at") == v.Get("expires_was") {
		// Unchanged: the form shows the expiry to the minute, and an
		// expired link's other fields must stay editable.
	} else if s := strings.TrimSpace(v.Get("expires_at")); s != "" {
		t, err := time.Parse("2006-01-02T15:04", s)
		if err != nil {
			f.fail("expires_at", "give a date and time, as 2027-01-31T18:00 (UTC)")
		} else {
			b["expires_at"] = t.UTC().Format(time.RFC3339)
		}
	} else if !create {
		b["expires_at"] = nil
	}
	var tags []string
	for _, t := range strings.Split(v.Get("tags"), ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	switch {
	case len(tags) > 0:
		b["tags"] = tags
	case !create:
		b["tags"] = nil
	}
	if s := v.Get("redirect"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			f.fail("redirect", "must be 301, 302, 307 or 308")
		} else {
			b["redirect"] = n
		}
	}
	if create {
		if s := strings.TrimSpace(v.Get("max_visits")); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				f.fail("max_visits", "must be a whole number")
			} else {
				b["max_visits"] = n
			}
		}
	}
	b["forward_query"] = v.Get("forward_query") != ""
	switch pw := v.Get("password"); {
	case pw != "":
		b["password"] = pw
	case !create && v.Get("remove_password") != "":
		b["password"] = nil
	}
	rules, lines, err := parseRules(v.Get("rules"))
	f.ruleLines = lines
	switch {
	case err != nil:
		f.fail("rules", err.Error())
	case len(rules) > 0:
		b["rules"] = rules
	case !create:
		b["rules"] = nil
	}
	text("title")
	text("description")
	text("note")
	if !create {
		b["disabled"] = v.Get("disabled") != ""
	}
	return b
}

// parseRules reads the rules field: one rule a line, its conditions
// (device=ios, country=FR, language=fr) then the URL; lines are the line
// numbers of the rules.
func parseRules(s string) (out []ruleView, lines []int, err error) {
	for i, line := range strings.Split(s, "\n") {
		words := strings.Fields(line)
		if len(words) == 0 {
			continue
		}
		r := ruleView{URL: words[len(words)-1]}
		for _, w := range words[:len(words)-1] {
			k, val, ok := strings.Cut(w, "=")
			switch {
			case !ok:
				return nil, nil, errors.New("line " + strconv.Itoa(i+1) + ": write conditions as device=ios, country=FR or language=fr, then the URL")
			case k == "device":
				r.Device = val
			case k == "country":
				r.Country = val
			case k == "language":
				r.Language = val
			default:
				return nil, nil, errors.New("line " + strconv.Itoa(i+1) + ": " + k + " is no condition: use device, country or language")
			}
		}
		out = append(out, r)
		lines = append(lines, i+1)
	}
	return out, lines, nil
}

func formatRules(rules []ruleView) string {
	var b strings.Builder
	for _, r := range rules {
		for _, c := range [][2]string{{"device", r.Device}, {"country", r.Country}, {"language", r.Language}} {
			if c[1] != "" {
				b.WriteString(c[0] + "=" + c[1] + " ")
			}
		}
		b.WriteString(r.URL + "\n")
	}
	return b.String()
}

// home serves GET /ui/: the shorten form and the key's latest links.
func (u *UI) home(w http.ResponseWriter, r *http.Request) {
	u.renderHome(w, r, http.StatusOK, &form{Values: url.Values{"redirect": {"302"}}})
}

type homeData struct {
	Form   *form
	Recent []linkView
	// CanWrite and CanList say what the key may do.
	CanWrite, CanList bool
}

func (u *UI) renderHome(w http.ResponseWriter, r *http.Request, status int, f *form) {
	d := homeData{Form: f}
	v := view{Title: "Shorten a link", Nav: "shorten", Data: &d}
	k := sessionOf(r).key
	d.CanWrite, d.CanList = k.Scopes.Has(scopeLinksWrite), k.Scopes.Has(scopeLinksRead)
	if d.CanList {
		var page listAnswer
		if err := call(u.api, r, http.MethodGet, "/api/v1/links?limit=5", nil, &page); err == nil {
			d.Recent = page.Links
		}
	}
	u.render(w, r, status, "home", v)
}

// createLink serves POST /ui/links: the shorten form. A bad field comes
// back beside the form's field with the API's words (422); a created link
// goes to its page.
func (u *UI) createLink(w http.ResponseWriter, r *http.Request) {
	f := &form{Values: r.PostForm}
	body := linkBody(f, true)
	if f.failed() {
		u.renderHome(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	var l linkView
	if err := call(u.api, r, http.MethodPost, "/api/v1/links", body, &l); err != nil {
		if !formProblem(err) {
			u.apiFailed(w, r, err)
			return
		}
		f.place(err, createFields...)
		u.renderHome(w, r, http.StatusUnprocessableEntity, f)
		return
	}
	http.Redirect(w, r, "/ui/links/"+url.PathEscape(l.Code)+"?done=created", http.StatusSeeOther)
}

// listAnswer is GET /api/v1/links.
type listAnswer struct {
	Links      []linkView `json:"links"`
	NextCursor *string    `json:"next_cursor"`
}

type listData struct {
	Q, Tag, Sort string
	Links        []linkView
	Tags         []tagCount
	Next         string
	Clicks       bool
	Failed       string
	Result       *bulkOutcome
}

// NextURL is the next page's address.
func (d *listData) NextURL() string { return d.url(d.Next) }

// FirstURL is the first page's address.
func (d *listData) FirstURL() string { return d.url("") }

func (d *listData) url(cursor string) string {
	q := url.Values{}
	for k, v := range map[string]string{"q": d.Q, "tag": d.Tag, "sort": d.Sort, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if len(q) == 0 {
		return "/ui/links"
	}
	return "/ui/links?" + q.Encode()
}

type tagCount struct {
	Tag   string `json:"tag"`
	Count int    `json:"links"`
}

// listPage is how many links a page lists.
const listPage = 25

// listLinks serves GET /ui/links: search, tag filter, sort, cursor pages,
// and the bulk form around them.
func (u *UI) listLinks(w http.ResponseWriter, r *http.Request) {
	u.renderList(w, r, http.StatusOK, nil)
}

func (u *UI) renderList(w http.ResponseWriter, r *http.Request, status int, res *bulkOutcome) {
	in := r.URL.Query()
	d := &listData{Q: strings.TrimSpace(in.Get("q")), Tag: strings.TrimSpace(in.Get("tag")), Sort: in.Get("sort"), Result: res}
	k := sessionOf(r).key
	d.Clicks = k.Scopes.Has(scopeStatsRead)
	q := url.Values{"limit": {strconv.Itoa(listPage)}}
	for name, v := range map[string]string{"q": d.Q, "tag": d.Tag, "sort": d.Sort, "cursor": in.Get("cursor")} {
		if v != "" {
			q.Set(name, v)
		}
	}
	var page listAnswer
	if err := call(u.api, r, http.MethodGet, "/api/v1/links?"+q.Encode(), nil, &page); err != nil {
		var p *problem
		if !errors.As(err, &p) || p.Status != http.StatusBadRequest && p.Status != http.StatusTooManyRequests {
			u.apiFailed(w, r, err)
			return
		}
		d.Failed, status = p.Error(), p.Status
	}
	d.Links = page.Links
	if page.NextCursor != nil {
		d.Next = *page.NextCursor
	}
	var tags struct {
		Tags []tagCount `json:"tags"`
	}
	if err := call(u.api, r, http.MethodGet, "/api/v1/tags?limit=50", nil, &tags); err == nil {
		d.Tags = tags.Tags
	}
	flash := ""
	if c := in.Get("deleted"); c != "" && link.ValidCode(c) {
		flash = "Deleted " + c + "."
	}
	u.render(w, r, status, "links", view{Title: "My links", Nav: "links", Flash: flash, Data: d, Push: d.FirstURL()})
}

// bulkOutcome is what a bulk action did.
type bulkOutcome struct {
	Done    string
	Count   int
	Failed  []string
	Problem string
}

// bulk serves POST /ui/links/bulk: the selected links disabled, enabled,
// deleted, or their tags replaced, through the API's bulk routes.
func (u *UI) bulk(w http.ResponseWriter, r *http.Request) {
	codes := r.PostForm["code"]
	out := &bulkOutcome{}
	var path string
	body := map[string]any{"codes": codes}
	switch r.PostFormValue("action") {
	case "disable":
		path, out.Done, body["patch"] = "/api/v1/links/bulk-update", "Disabled", map[string]any{"disabled": true}
	case "enable":
		path, out.Done, body["patch"] = "/api/v1/links/bulk-update", "Enabled", map[string]any{"disabled": false}
	case "delete":
		path, out.Done = "/api/v1/links/bulk-delete", "Deleted"
	case "tag":
		var tags []string
		for _, t := range strings.Split(r.PostFormValue("tags"), ",") {
			if t = strings.TrimSpace(t); t != "" {
				tags = append(tags, t)
			}
		}
		path, out.Done, body["patch"] = "/api/v1/links/bulk-update", "Retagged", map[string]any{"tags": tags}
	default:
		out.Problem = "Choose what to do with the selected links."
	}
	if len(codes) == 0 && out.Problem == "" {
		out.Problem = "Select at least one link."
	}
	status := http.StatusOK
	if out.Problem == "" {
		var res struct {
			Results []struct {
				Code    string   `json:"code"`
				Status  int      `json:"status"`
				Problem *problem `json:"problem"`
			} `json:"results"`
		}
		if err := call(u.api, r, http.MethodPost, path, body, &res); err != nil {
			out.Problem = err.Error()
		}
		for _, it := range res.Results {
			if it.Status < 300 {
				out.Count++
			} else {
				msg := it.Code
				if it.Problem != nil {
					msg += ": " + it.Problem.Error()
				}
				out.Failed = append(out.Failed, msg)
			}
		}
	}
	if out.Problem != "" {
		status = http.StatusUnprocessableEntity
	}
	// The list is shown as it was asked for (the form posts back to the
	// list's own query).
	u.renderList(w, r, status, out)
}

type linkData struct {
	Link linkView
	Form *form
	// Done names what just happened ("created", "updated").
	Done     string
	CanWrite bool
	CanStats bool
}

// linkPage serves GET /ui/links/{code}: the link, its QR code, copy,
// preview, and the edit form.
func (u *UI) linkPage(w http.ResponseWriter, r *http.Request) {
	var l linkView
	code, ok := u.code(w, r)
	if !ok {
		return
	}
	if err := call(u.api, r, http.MethodGet, "/api/v1/links/"+url.PathEscape(code), nil, &l); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	d := &linkData{Link: l, Done: r.URL.Query().Get("done")}
	u.renderLink(w, r, http.StatusOK, d)
}

func (u *UI) renderLink(w http.ResponseWriter, r *http.Request, status int, d *linkData) {
	k := sessionOf(r).key
	d.CanWrite, d.CanStats = k.Scopes.Has(scopeLinksWrite), k.Scopes.Has(scopeStatsRead)
	flash := map[string]string{"created": "Link created.", "updated": "Saved.", "disabled": "Link turned off.", "enabled": "Link turned on."}[d.Done]
	u.render(w, r, status, "link", view{Title: "Link " + d.Link.Code, Nav: "links", Flash: flash, Data: d})
}

// code is the request's {code}, or false (a 404 page written) when it is
// no code at all: what reaches the API's path is only ever a code.
func (u *UI) code(w http.ResponseWriter, r *http.Request) (string, bool) {
	c := r.PathValue("code")
	if !link.ValidCode(c) {
		u.notFound(w, r)
		return "", false
	}
	return c, true
}

// formOf is the edit form filled with l as stored.
func formOf(l linkView) *form {
	v := url.Values{"url": {l.URL}, "expires_at": {l.ExpiresInput()}, "expires_was": {l.ExpiresInput()}, "tags": {strings.Join(l.Tags, ", ")},
		"redirect": {strconv.Itoa(l.Redirect)}, "title": {l.Title}, "description": {l.Description}, "note": {l.Note},
		"rules": {l.RulesText()}}
	if l.ForwardQuery {
		v.Set("forward_query", "on")
	}
	if l.Disabled {
		v.Set("disabled", "on")
	}
	return &form{Values: v}
}

// editFields are the edit form's fields.
var editFields = []string{"url", "expires_at", "tags", "redirect", "password", "rules", "title", "description", "note", "forward_query", "disabled"}

// updateLink serves POST /ui/links/{code}: the edit form (op=disable or
// op=enable: the switch alone).
func (u *UI) updateLink(w http.ResponseWriter, r *http.Request) {
	code, ok := u.code(w, r)
	if !ok {
		return
	}
	path := "/api/v1/links/" + url.PathEscape(code)
	f := &form{Values: r.PostForm}
	var body map[string]any
	done := "updated"
	switch r.PostFormValue("op") {
	case "disable":
		body, done = map[string]any{"disabled": true}, "disabled"
	case "enable":
		body, done = map[string]any{"disabled": false}, "enabled"
	default:
		body = linkBody(f, false)
	}
	var l linkView
	err := errors.New("invalid")
	if !f.failed() {
		err = call(u.api, r, http.MethodPatch, path, body, &l)
	}
	if err == nil {
		http.Redirect(w, r, "/ui/links/"+url.PathEscape(code)+"?done="+done, http.StatusSeeOther)
		return
	}
	if !f.failed() {
		if !formProblem(err) {
			u.apiFailed(w, r, err)
			return
		}
		f.place(err, editFields...)
	}
	// Show the form as sent, beside the link as stored.
	if err := call(u.api, r, http.MethodGet, path, nil, &l); err != nil {
		u.apiFailed(w, r, err)
		return
	}
	u.renderLink(w, r, http.StatusUnprocessableEntity, &linkData{Link: l, Form: f})
}

// deleteLink serves POST /ui/links/{code}/delete.
func (u *UI) deleteLink(w http.ResponseWriter, r *http.Request) {
	code, ok := u.code(w, r)
	if !ok {
		return
	}
	if err := call(u.api, r, http.MethodDelete, "/api/v1/links/"+url.PathEscape(code), nil, nil); err != nil && !errors.Is(err, link.ErrDeleted) {
		u.apiFailed(w, r, err)
		return
	}
	http.Redirect(w, r, "/ui/links?"+url.Values{"deleted": {code}}.Encode(), http.StatusSeeOther)
}
