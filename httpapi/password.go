package httpapi

import (
	"bytes"
	"context"
	"errors"
	"html/template"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/linkraft/linkraft/internal/password"
	"github.com/linkraft/linkraft/link"
)

// Password links (issue 16, item 5). The password is hashed (argon2id) on
// the node that took the request, so only its hash reaches the Raft log, the
// other nodes and the disk; no answer, listing or export carries either.
// A GET of the link is a small form; the form POSTs the password to the same
// URL, and the right one is answered 303 to the destination. Guesses are
// limited per client network on each node and per link in the cluster, and every hash or
// check waits for one of a few slots (password.Hasher), so a flood of
// guesses costs the node at most that much memory and CPU at once.

// Guess limits: a person who mistypes has a few tries at once and more
// after a short wait; a script gets 5 a minute from one network (on each
// node), and 20 a minute at one link from everywhere (in the cluster: each
// of n nodes allows its share, linkGuessRate).
var (
	guessRatePerIP   = Rate{PerSecond: 5.0 / 60, Burst: 5}
	guessRatePerLink = Rate{PerSecond: 20.0 / 60, Burst: 20}
)

// linkGuessRate is one node's share of the per-link guess limit among n
// nodes, never below the per-network limit (a lone person's tries at one
// node are bounded by that first): up to 4 nodes the cluster allows 20 a
// minute at a link, as one node does; past that 5 a minute a node.
func linkGuessRate(n int) Rate {
	if n <= 1 {
		return guessRatePerLink
	}
	return Rate{
		PerSecond: max(guessRatePerLink.PerSecond/float64(n), guessRatePerIP.PerSecond),
		Burst:     max((guessRatePerLink.Burst+n-1)/n, guessRatePerIP.Burst),
	}
}

// Bounds of a guess: the form body, and how long a guess waits for a
// hashing slot before it is answered 503.
const (
	maxPasswordForm  = 1024
	passwordSlotWait = 5 * time.Second
)

// liveNodes is how many nodes share the per-link guess limit (1 without
// Config.Admin).
func (s *Server) liveNodes() int { return max(s.admin.LiveNodes(), 1) }

// errWrongPassword answers a guess that is not the link's password.
var errWrongPassword = &requestError{status: http.StatusForbidden, kind: "wrong-password", title: "Forbidden",
	detail: "the password is not this link's", field: "password"}

// checkPasswordInput checks a password as a visitor types it.
func checkPasswordInput(pw string) error {
	if pw == "" || len(pw) > password.MaxLength {
		return field("password", "must be 1 to "+strconv.Itoa(password.MaxLength)+" bytes", link.ErrInvalidInput)
	}
	return nil
}

// checkNewPassword checks a password a link is given: at least MinLength
// bytes, so that the guess limit is what stands between a visitor and the
// destination (a 1-byte password fell to a few guesses).
func checkNewPassword(pw string) error {
	if len(pw) < password.MinLength || len(pw) > password.MaxLength {
		return field("password", "must be "+strconv.Itoa(password.MinLength)+" to "+strconv.Itoa(password.MaxLength)+" bytes", link.ErrInvalidInput)
	}
	return nil
}

// hashPassword returns the hash a link stores for pw; "" for "" (no
// password).
func (s *Server) hashPassword(ctx context.Context, pw string) (string, error) {
	if pw == "" {
		return "", nil
	}
	ctx, cancel := context.WithTimeout(ctx, passwordSlotWait)
	defer cancel()
	return s.passwords.Hash(ctx, pw)
}

var passwordPage = template.Must(template.New("password").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex, nofollow">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Password required</title>
<style>` + visitorCSS + `</style>
</head><body><h1>Password required</h1>
<p>This link is protected by a password.</p>
{{if .Wrong}}<p class="err" role="alert">That password is not right.</p>{{end}}
<form method="post"><label for="pw">Password</label>
<input id="pw" name="password" type="password" required maxlength="{{.Max}}" autocomplete="current-password" autofocus>
<button type="submit">Continue</button></form>
</body></html>
`))

// writePasswordPage answers with the password form: 200 for the link's GET
// and HEAD, 403 after a wrong guess. The form posts to the page's own URL,
// query included, so a forwarded query survives it.
func (s *Server) writePasswordPage(w http.ResponseWriter, r *http.Request, status int) int {
	var body bytes.Buffer
	if err := passwordPage.Execute(&body, struct {
		Wrong bool
		Max   int
	}{status == http.StatusForbidden, password.MaxLength}); err != nil {
		return s.Error(w, r, err)
	}
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	// No script and no framing (a framed form is a clickjacking target).
	// No form-action: Chrome and Safari apply it to the redirect that
	// follows the form's POST, which leads to the destination's site.
	writePage(w, r, status, body.Bytes(), "no-store",
		"default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'")
	return status
}

// handleUnlock serves POST /{code}: the password form's answer. The right
// password is 303 See Other to the destination (never the link's own
// status: a 307 or 308 would make the browser post the password on to the
// destination), and uses up a visit of a limited link as its GET would; a
// wrong one is 403, the form again for a browser.
func (s *Server) handleUnlock(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	status := s.unlock(w, r)
	s.rec.Redirect(status, time.Since(start))
}

func (s *Server) unlock(w http.ResponseWriter, r *http.Request) int {
	if fixedSingleSegment[strings.TrimPrefix(r.URL.Path, "/")] {
		// /healthz and its kin: GET and HEAD only.
		w.Header().Set("Allow", "GET, HEAD")
		s.problem(w, r, http.StatusMethodNotAllowed, "method-not-allowed", "Method Not Allowed", r.Method+" is not allowed here")
		return http.StatusMethodNotAllowed
	}
	if !s.limitRedirect(w, r) {
		return http.StatusTooManyRequests
	}
	code, err := codeVar(r)
	if err != nil {
		return s.redirectError(w, r, err)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/x-www-form-urlencoded" {
		return s.Error(w, r, &requestError{status: http.StatusUnsupportedMediaType, kind: "unsupported-media-type",
			title: "Unsupported Media Type", detail: "send the password as a form (Content-Type: application/x-www-form-urlencoded)"})
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxPasswordForm)
	if err := r.ParseForm(); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return s.Error(w, r, &requestError{status: http.StatusRequestEntityTooLarge, kind: "body-too-large",
				title: "Content Too Large", detail: "the form is over " + strconv.Itoa(maxPasswordForm) + " bytes"})
		}
		return s.Error(w, r, badRequest("malformed-form", "the body is not a form"))
	}
	pw, ok := r.PostForm["password"]
	if !ok || len(pw) != 1 || checkPasswordInput(pw[0]) != nil {
		return s.Error(w, r, field("password", "the form must hold one password of 1 to "+strconv.Itoa(password.MaxLength)+" bytes", link.ErrInvalidInput))
	}
	l, err := s.links.Resolve(r.Context(), code)
	switch {
	case errors.Is(err, link.ErrNotFound):
		return s.redirectError(w, r, err)
	case err != nil:
		return s.Error(w, r, err)
	}
	switch s.outcome(l) {
	case gone:
		return s.redirectError(w, r, s.goneReason(l))
	case takenDown:
		return s.redirectError(w, r, errTakenDown)
	}
	if l.PasswordHash != "" {
		// The buckets are spent before the check, right or wrong: a
		// guesser learns nothing by stopping at a 429. The link's own
		// budget is spent only by networks that have guessed it wrong
		// lately: strangers who drain it lock out themselves, not a
		// visitor who comes with the right password (each network's first
		// tries are bounded by its own budget alone).
		net := clientNet(s.clientIP(r))
		if !s.spend(w, r, s.guesses, "ip:"+net, "password-guesses", guessRatePerIP, 1) ||
			s.guessed.has(code, net) && !s.spend(w, r, s.guesses, "link:"+code, "password-guesses-per-link", linkGuessRate(s.liveNodes()), 1) {
			return http.StatusTooManyRequests
		}
		ctx, cancel := context.WithTimeout(r.Context(), passwordSlotWait)
		right, err := s.passwords.Verify(ctx, l.PasswordHash, pw[0])
		cancel()
		if err != nil {
			return s.Error(w, r, err)
		}
		if !right {
			s.guessed.add(code, net)
			if wantsHTML(r) {
				return s.writePasswordPage(w, r, http.StatusForbidden)
			}
			return s.Error(w, r, errWrongPassword)
		}
	}
	if l.MaxVisits > 0 {
		if l, err = s.links.ConsumeVisit(r.Context(), code); err != nil {
			return s.consumeError(w, r, err)
		}
	}
	loc, _ := s.target(l, r.UserAgent(), s.clientIP(r), r.Header.Get("Accept-Language"), r.URL.RawQuery)
	h := w.Header()
	h.Set("Location", loc)
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusSeeOther)
	if s.clicks != nil {
		s.recordClick(l.Code, s.clientIP(r), r.UserAgent(), r.Referer(),
			r.Header.Get("DNT") == "1" || r.Header.Get("Sec-GPC") == "1")
	}
	return http.StatusSeeOther
}

// suspects remembers, for an hour, the client networks that guessed a
// link's password wrong (at most maxSuspects pairs; when full, those older
// than an hour go, then the oldest half).
type suspects struct {
	mu  sync.Mutex
	at  map[string]time.Time
	now func() time.Time
}

const (
	maxSuspects   = 100_000
	suspectMemory = time.Hour
)

func newSuspects(now func() time.Time) *suspects {
	return &suspects{at: map[string]time.Time{}, now: now}
}

func (s *suspects) has(code, net string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.at[code+"|"+net]
	return ok && s.now().Sub(t) < suspectMemory
}

func (s *suspects) add(code, net string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.at) >= maxSuspects {
		for k, t := range s.at {
			if now.Sub(t) >= suspectMemory {
				delete(s.at, k)
			}
		}
		if len(s.at) >= maxSuspects {
			n := 0
			for k := range s.at {
				if n%2 == 0 {
					delete(s.at, k)
				}
				n++
			}
		}
	}
	s.at[code+"|"+net] = now
}
