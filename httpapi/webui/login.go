package webui

import (
	"errors"
	"net/http"
	"path"
	"strings"

	"github.com/linkraft/linkraft/internal/apikey"
)

// Scopes the pages check to show what a key may do (the API checks them
// again on every call).
const (
	scopeLinksRead  = apikey.LinksRead
	scopeLinksWrite = apikey.LinksWrite
	scopeStatsRead  = apikey.StatsRead
)

type loginData struct {
	Next, Error string
}

// safeNext keeps a sign-in's return address inside the UI: a clean path
// under /ui/ (no "..", no escapes, no other host: "//evil", "/\\evil"),
// and any query.
func safeNext(next string) string {
	p, _, _ := strings.Cut(next, "?")
	clean := path.Clean(p)
	if !strings.HasPrefix(p, "/ui/") || clean != p && clean+"/" != p || strings.ContainsAny(p, "%\\") || strings.Contains(p, "..") {
		return "/ui/"
	}
	for _, c := range []byte(next) {
		if c < 0x20 || c == 0x7f || c == '\\' {
			return "/ui/"
		}
	}
	return next
}

// loginPage serves GET /ui/login.
func (u *UI) loginPage(w http.ResponseWriter, r *http.Request) {
	d := &loginData{Next: safeNext(r.URL.Query().Get("next"))}
	switch r.URL.Query().Get("why") {
	case "revoked":
		d.Error = "The key you signed in with was revoked: sign in with another."
	case "expired":
		d.Error = "Your session expired: sign in again."
	}
	u.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: d})
}

// login serves POST /ui/login: an API key for a session cookie. The key
// itself is never stored in the browser, a URL or a log.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	secret := strings.TrimSpace(r.PostFormValue("key"))
	d := &loginData{Next: safeNext(r.PostFormValue("next"))}
	k, err := u.keys.Authenticate(secret)
	if err != nil {
		if !errors.Is(err, apikey.ErrUnauthorized) {
			u.log.Error("web ui: sign-in failed", "err", err)
		}
		d.Error = "That key is unknown or revoked."
		u.render(w, r, http.StatusUnauthorized, "login", view{Title: "Sign in", Data: d})
		return
	}
	u.setCookie(w, r, u.newSession(k))
	u.log.Info("web ui: signed in", "key_id", k.ID, "owner", k.Owner)
	http.Redirect(w, r, d.Next, http.StatusSeeOther)
}

// logout serves POST /ui/logout.
func (u *UI) logout(w http.ResponseWriter, r *http.Request) {
	u.clearCookie(w, r)
	u.log.Info("web ui: signed out", "key_id", sessionOf(r).key.ID)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
