package httpapi

import (
	"bytes"
	"errors"
	"html/template"
	"net/http"
	"strconv"

	"github.com/linkraft/linkraft/link"
)

// previewPage is GET /{code}+: where a link goes, without going there.
var previewPage = template.Must(template.New("preview").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex, nofollow">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Preview of {{.Short}}</title>
<style>` + visitorCSS + `.dest{word-break:break-all;font-size:1.1rem}img{width:12rem;height:12rem;background:#fff}</style>
</head><body>
<h1>{{if .Title}}{{.Title}}{{else}}{{.Short}}{{end}}</h1>
{{if .Description}}<p>{{.Description}}</p>{{end}}
<dl>
<dt>Short link</dt><dd>{{.Short}}</dd>
{{if .Protected}}<dt>Leads to</dt><dd>a destination behind a password</dd>
{{else if .Limited}}<dt>Leads to</dt><dd>a destination shown only to a visit (the link has limited visits)</dd>
{{else}}<dt>Leads to</dt><dd class="dest"><a href="{{.URL}}" rel="nofollow noopener noreferrer">{{.URL}}</a></dd>{{end}}
<dt>Created</dt><dd><time datetime="{{.Created}}">{{.CreatedText}}</time></dd>
</dl>
<p><img src="{{.QR}}" alt="QR code of {{.Short}}"></p>
</body></html>
`))

// handlePreview serves GET and HEAD /{code}+ (bit.ly's convention): the
// destination, creation date and QR code of a link that would redirect,
// without redirecting. Public; unknown codes answer 404 and links that
// would not redirect 410, as /{code} does.
func (s *Server) handlePreview(w http.ResponseWriter, r *http.Request) {
	if !s.limitRedirect(w, r) || !s.limitRender(w, r, 1) {
		return
	}
	code, err := codeVar(r)
	if err != nil {
		s.redirectError(w, r, err)
		return
	}
	l, err := s.links.Resolve(r.Context(), code)
	switch {
	case err != nil && !errors.Is(err, link.ErrNotFound):
		s.Error(w, r, err)
		return
	case err != nil:
		s.redirectError(w, r, err)
		return
	case l.Gone(s.now()):
		s.redirectError(w, r, s.goneReason(l))
		return
	case s.blocked(l):
		s.redirectError(w, r, errTakenDown)
		return
	}
	short := s.publicURL + "/" + l.Code
	page := map[string]any{"Short": short, "URL": l.URL, "Title": l.Title, "Description": l.Description}
	switch {
	case l.PasswordHash != "":
		// The password guards the destination and what its owner wrote
		// about it.
		page = map[string]any{"Short": short, "Protected": true}
	case l.MaxVisits > 0:
		// So do the visits of a link that has a limit: a preview uses none.
		page = map[string]any{"Short": short, "Title": l.Title, "Description": l.Description, "Limited": true}
	}
	var body bytes.Buffer
	page["QR"] = "/" + l.Code + "/qr?format=svg"
	page["Created"] = l.CreatedAt.UTC().Format("2006-01-02T15:04:05Z")
	page["CreatedText"] = l.CreatedAt.UTC().Format("2 January 2006, 15:04 UTC")
	if err := previewPage.Execute(&body, page); err != nil {
		s.Error(w, r, err)
		return
	}
	// Nothing but its own QR image and inline style: a destination that
	// tries to smuggle markup in finds no script to run.
	writePage(w, r, http.StatusOK, body.Bytes(), "public, max-age=60",
		"default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'")
}

// writePage answers with one of the public HTML pages: kept out of search
// engines, with its cache policy and content security policy.
func writePage(w http.ResponseWriter, r *http.Request, status int, body []byte, cache, csp string) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", cache)
	h.Set("X-Robots-Tag", "noindex, nofollow")
	h.Set("Content-Security-Policy", csp)
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}
