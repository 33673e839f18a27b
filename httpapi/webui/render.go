package webui

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/status"
)

// csp is every page's Content Security Policy: scripts, styles, images
// and requests from this origin only; no inline script or style, no
// framing, forms that post nowhere else.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// view is what every page's template gets.
type view struct {
	Title string
	// Nav names the page's menu entry ("shorten", "links", "transfer",
	// "keys", "blocklist", "cluster").
	Nav string
	// Key is the signed-in key (nil on the sign-in page); CSRF its token.
	Key  *apikey.Key
	CSRF string
	// Flash is a one-line notice at the top of the page.
	Flash string
	// Data is the page's own.
	Data any
	// Push is the address a form's answer stands for (the list a bulk
	// action came from): a boosted post that answers a page puts it in
	// the address bar, so that reload and back show that page.
	Push string
}

// Admin reports whether the signed-in key is an admin key.
func (v view) Admin() bool { return v.Key != nil && v.Key.Scopes&apikey.Admin != 0 }

// fieldView is one input of a form, with its error.
type fieldView struct {
	Name, Label, Type, Hint, Value, Err string
}

// parsePages parses every page with the layout.
func parsePages(a *assets) (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"static": a.url,
		"when": func(t *time.Time) string {
			if t == nil || t.IsZero() {
				return ""
			}
			return t.UTC().Format("2006-01-02 15:04 UTC")
		},
		"date": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"join": strings.Join,
		"list": func(a ...string) []string { return a },
		"bytes": func(n int64) string {
			const unit = 1024
			if n < unit {
				return strconv.FormatInt(n, 10) + " B"
			}
			div, exp := int64(unit), 0
			for m := n / unit; m >= unit; m /= unit {
				div *= unit
				exp++
			}
			return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
		},
		"formOf":  formOf,
		"prepend": func(g status.Group, gs []status.Group) []status.Group { return append([]status.Group{g}, gs...) },
		"field": func(f *form, name, label, typ, hint string) fieldView {
			return fieldView{Name: name, Label: label, Type: typ, Hint: hint, Value: f.Get(name), Err: f.Err(name)}
		},
	}
	pages := map[string]*template.Template{}
	names, err := fs.Glob(files, "templates/*.html")
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		base := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if base == "layout" || strings.HasPrefix(base, "_") {
			continue // the layout, and the parts every page may use
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(files, "templates/layout.html", "templates/_*.html", n)
		if err != nil {
			return nil, fmt.Errorf("webui: template %s: %w", base, err)
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes page with v at status, gzipped for a client that takes
// it; a signed-in request's key and CSRF token are filled in.
func (u *UI) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	if s := sessionOf(r); s != nil {
		v.Key, v.CSRF = &s.key, s.csrf
	}
	t, ok := u.pages[page]
	if !ok {
		panic("webui: no page " + page)
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		u.log.Error("web ui: rendering a page failed", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "no-store")
	h.Set("Vary", "Accept-Encoding, HX-Request")
	if r.Header.Get("HX-Boosted") != "" {
		// A boosted link or form puts an address in the address bar: a
		// page read is its own; a form's answer the page it stands for;
		// a form answered with its errors keeps the address it was sent
		// from. (Fragments, as the cluster's refresh, push nothing.)
		switch {
		case status >= 400 || r.Method != http.MethodGet && v.Push == "":
			h.Set("HX-Push-Url", "false")
		case r.Method == http.MethodGet:
			h.Set("HX-Push-Url", r.URL.RequestURI())
		default:
			h.Set("HX-Push-Url", v.Push)
		}
	}
	body := buf.Bytes()
	if len(body) > 1024 && acceptsGzip(r) {
		var z bytes.Buffer
		zw := gzips.Get().(*gzip.Writer)
		zw.Reset(&z)
		_, _ = zw.Write(body)
		_ = zw.Close()
		gzips.Put(zw)
		body = z.Bytes()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// errorPage renders a message page at status.
func (u *UI) errorPage(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	u.render(w, r, status, "message", view{Title: title, Data: msg})
}

// apiFailed renders the error page for an API call that failed outright
// (not a field the user can correct).
func (u *UI) apiFailed(w http.ResponseWriter, r *http.Request, err error) {
	if p, ok := err.(*problem); ok {
		title := p.Title
		msg := p.Error()
		if p.Status == http.StatusForbidden {
			msg = "Your key may not do this: " + msg
		}
		u.errorPage(w, r, p.Status, title, msg)
		return
	}
	u.log.Error("web ui: an API call failed", "path", r.URL.Path, "err", err)
	u.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "The node could not answer; try again.")
}

// gzips are gzip writers for pages, reused: a new one allocates its
// compressor's tables for every page.
var gzips = sync.Pool{New: func() any { w, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed); return w }}
