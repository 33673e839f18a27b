package webui

import (
	"crypto/rand"
	"encoding/base64"
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
	// CSRF is the sign-in form's token (loginToken).
	CSRF string
}

// The sign-in form has its own CSRF token, before any session: a random
// value in a cookie of the sign-in page alone (HttpOnly, SameSite=Strict,
// an hour) and its HMAC in the form, checked on the post beside the origin
// check. Another site can neither read the cookie nor make the token, so
// it cannot sign a browser in with a key of its own choosing.
const loginCookie = "linkraft_login"

// loginToken returns the token of the browser's sign-in cookie, setting a
// new cookie when it has none.
func (u *UI) loginToken(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(loginCookie); err == nil && len(c.Value) == 22 {
		return u.loginMAC(c.Value)
	}
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails
	v := base64.RawURLEncoding.EncodeToString(b[:])
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: v, Path: "/ui/login", MaxAge: 3600, HttpOnly: true,
		Secure: u.secure || r.TLS != nil, SameSite: http.SameSiteStrictMode})
	return u.loginMAC(v)
}

func (u *UI) loginMAC(v string) string {
	return base64.RawURLEncoding.EncodeToString(u.mac("login", v)[:24])
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
	d.CSRF = u.loginToken(w, r)
	u.render(w, r, http.StatusOK, "login", view{Title: "Sign in", Data: d})
}

// login serves POST /ui/login: an API key for a session cookie. The key
// itself is never stored in the browser, a URL or a log.
func (u *UI) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 4<<10)
	secret := strings.TrimSpace(r.PostFormValue("key"))
	d := &loginData{Next: safeNext(r.PostFormValue("next"))}
	c, err := r.Cookie(loginCookie)
	if err != nil || !sameToken(r.PostFormValue("csrf"), u.loginMAC(c.Value)) {
		d.Error, d.CSRF = "This sign-in form is stale or came from another site: sign in again here.", u.loginToken(w, r)
		u.render(w, r, http.StatusForbidden, "login", view{Title: "Sign in", Data: d})
		return
	}
	d.CSRF = u.loginToken(w, r)
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
