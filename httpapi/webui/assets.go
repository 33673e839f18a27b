package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
)

// The static files are embedded in the binary: the UI's own CSS and
// script, and the vendored libraries (static/vendor, written by
// scripts/vendor-ui.sh and pinned in its SHA256SUMS). Each is served with
// a strong ETag, gzipped once at start for clients that take gzip, and
// cached for a year when asked for by its versioned URL (?v=<hash>, which
// the pages use), so a new binary's files replace the old at once.

//go:embed static all:templates
var files embed.FS

// asset is one static file.
type asset struct {
	name, ctype, etag, version string
	raw, gz                    []byte
}

// assets are the static files by name (vendor/x.js is "vendor/x.js").
type assets struct{ byName map[string]*asset }

func loadAssets() (*assets, error) {
	a := &assets{byName: map[string]*asset{}}
	err := fs.WalkDir(files, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(raw)
		name := strings.TrimPrefix(p, "static/")
		ctype := mime.TypeByExtension(path.Ext(name))
		if ctype == "" {
			ctype = "text/plain; charset=utf-8"
		}
		as := &asset{name: name, ctype: ctype, raw: raw, version: hex.EncodeToString(sum[:6]),
			etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(raw)
		if err := zw.Close(); err != nil {
			return err
		}
		if buf.Len() < len(raw) {
			as.gz = buf.Bytes()
		}
		a.byName[name] = as
		return nil
	})
	return a, err
}

// url is the versioned URL of a static file; a name that is not one
// panics while the templates are parsed, never while serving.
func (a *assets) url(name string) template.URL {
	as, ok := a.byName[name]
	if !ok {
		panic("webui: no static file " + name)
	}
	return template.URL("/ui/static/" + name + "?v=" + as.version)
}

// serveStatic serves GET /ui/static/{file} (and vendor/{file}).
func (u *UI) serveStatic(w http.ResponseWriter, r *http.Request) {
	u.serveAsset(w, r, strings.TrimPrefix(r.URL.Path, "/ui/static/"))
}

// serveAsset serves the static file name.
func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	as, ok := u.static.byName[name]
	if !ok || strings.HasSuffix(name, "SHA256SUMS") {
		u.notFound(w, r)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Type", as.ctype)
	h.Set("ETag", as.etag)
	h.Set("Vary", "Accept-Encoding")
	if r.URL.Query().Get("v") == as.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, as.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := as.raw
	if as.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = as.gz
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

// acceptsGzip reports whether the client takes gzip (q=0 refuses it).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.TrimSpace(k) == "q" {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}
