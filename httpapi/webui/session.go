package webui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/linkraft/linkraft/internal/apikey"
)

// A session cookie is "v1.<key id>.<expiry, unix seconds>.<nonce>.<mac>":
// the MAC is HMAC-SHA256 under the UI's secret of the rest, checked before
// anything else (a forged cookie learns nothing, not even whether its key
// ID exists); the nonce makes every sign-in's session (and so its CSRF
// token) its own. A cookie is good for the key it names, until its expiry
// or the key's revocation, on a cluster that shares the secret; key IDs
// are random and never reused. It holds no secret and
// nothing a client could change without the MAC failing.

const cookieName = "linkraft_session"

var (
	errNoSession = errors.New("no valid session")
	errExpired   = errors.New("session expired")
	errRevoked   = errors.New("session's key revoked")
)

func (u *UI) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, u.secret)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return m.Sum(nil)
}

// newSession returns the cookie value of a session for k.
func (u *UI) newSession(k apikey.Key) string {
	exp := strconv.FormatInt(u.now().Add(u.ttl).Unix(), 10)
	var nonce [12]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand never fails
	body := "v1." + k.ID + "." + exp + "." + base64.RawURLEncoding.EncodeToString(nonce[:])
	return body + "." + base64.RawURLEncoding.EncodeToString(u.mac("session", body))
}

// verifySession returns the key of a session cookie's value: errNoSession
// for a malformed or forged one, errExpired past its expiry, errRevoked
// when its key is gone.
func (u *UI) verifySession(v string) (apikey.Key, error) {
	if len(v) > 256 {
		return apikey.Key{}, errNoSession
	}
	parts := strings.Split(v, ".")
	if len(parts) != 5 || parts[0] != "v1" || !apikey.ValidID(parts[1]) {
		return apikey.Key{}, errNoSession
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return apikey.Key{}, errNoSession
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[4])
	if err != nil {
		return apikey.Key{}, errNoSession
	}
	if !hmac.Equal(sig, u.mac("session", strings.Join(parts[:4], "."))) {
		return apikey.Key{}, errNoSession
	}
	if u.now().Unix() >= exp {
		return apikey.Key{}, errExpired
	}
	k, err := u.keys.Key(parts[1])
	switch {
	case errors.Is(err, apikey.ErrNotFound):
		return apikey.Key{}, errRevoked
	case err != nil:
		return apikey.Key{}, err
	}
	return k, nil
}

// csrfToken is the token the forms of the session whose cookie value is v
// carry: an HMAC of the session, so it cannot be made without the secret
// and is good for that session alone.
func (u *UI) csrfToken(v string) string {
	return base64.RawURLEncoding.EncodeToString(u.mac("csrf", v)[:24])
}

// validCSRF reports whether r carries want, in the X-CSRF-Token header
// (htmx requests) or the csrf form field.
func (u *UI) validCSRF(r *http.Request, want string) bool {
	got := r.Header.Get("X-CSRF-Token")
	if got == "" {
		got = r.PostForm.Get("csrf")
	}
	return sameToken(got, want)
}

// sameToken compares a token sent with the one expected, in constant time.
func sameToken(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

func (u *UI) setCookie(w http.ResponseWriter, r *http.Request, v string) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: v, Path: "/ui/", MaxAge: int(u.ttl / time.Second),
		HttpOnly: true, Secure: u.secure || r.TLS != nil, SameSite: http.SameSiteStrictMode})
}

func (u *UI) clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1,
		HttpOnly: true, Secure: u.secure || r.TLS != nil, SameSite: http.SameSiteStrictMode})
}
