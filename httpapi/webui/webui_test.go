package webui_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/httpapi/webui"
	"github.com/linkraft/linkraft/internal/apikey"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/link"
)

// site is a real node of one (Raft, bbolt) behind its API and the UI on a
// loopback HTTP server.
type site struct {
	t      testing.TB
	srv    *httptest.Server
	node   *cluster.Node
	admin  string // the admin key's secret
	secret []byte
	now    *time.Time
}

func newSite(t testing.TB) *site {
	t.Helper()
	n := testcluster.Node(t, cluster.Config{DataDir: t.TempDir(), Shards: 2, NodeID: "n1"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	secret, _, err := n.Keys().Create(ctx, apikey.Request{Name: "ops", Owner: "ops", Scopes: apikey.Admin})
	if err != nil {
		t.Fatal(err)
	}
	s := &site{t: t, node: n, admin: secret, secret: []byte(strings.Repeat("k", 32))}
	now := time.Now()
	s.now = &now
	api, err := httpapi.New(httpapi.Config{Links: n.Links(), Keys: n.Keys(), Admin: n.Admin(), Analytics: n.Analytics(),
		URLPolicy: link.URLPolicy{AllowPrivate: true}})
	if err != nil {
		t.Fatal(err)
	}
	ui, err := webui.New(webui.Config{API: api, Admin: api.Admin(), Keys: n.Keys(), Secret: s.secret,
		Now: func() time.Time { return *s.now }})
	if err != nil {
		t.Fatal(err)
	}
	s.srv = httptest.NewServer(webui.Mount(ui, api))
	t.Cleanup(s.srv.Close)
	return s
}

// browser is a client with a cookie jar that does not follow redirects.
type browser struct {
	t    testing.TB
	s    *site
	c    *http.Client
	csrf string
	// hdr is the last answer's header.
	hdr http.Header
}

func (s *site) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: s.t, s: s, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// do sends a request as a browser would (same origin for a form post)
// and returns the status, the Location and the body.
func (b *browser) do(method, path string, form url.Values, hdr ...string) (int, string, string) {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, b.s.srv.URL+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	req.Header.Set("Accept", "text/html")
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	b.hdr = resp.Header
	raw, _ := io.ReadAll(resp.Body)
	if m := csrfField.FindSubmatch(raw); m != nil {
		b.csrf = string(m[1])
	}
	return resp.StatusCode, resp.Header.Get("Location"), string(raw)
}

// login posts the sign-in form as a browser that opened it first.
func (b *browser) login(form url.Values) (int, string, string) {
	b.t.Helper()
	b.do(http.MethodGet, "/ui/login", nil)
	form.Set("csrf", b.csrf)
	return b.do(http.MethodPost, "/ui/login", form)
}

func (b *browser) signIn(secret string) {
	b.t.Helper()
	st, loc, body := b.login(url.Values{"key": {secret}, "next": {"/ui/"}})
	if st != http.StatusSeeOther || loc != "/ui/" {
		b.t.Fatalf("sign-in: %d %q %s", st, loc, body)
	}
	if st, _, _ := b.do(http.MethodGet, "/ui/", nil); st != http.StatusOK || b.csrf == "" {
		b.t.Fatalf("home after sign-in: %d, csrf %q", st, b.csrf)
	}
}

func (b *browser) post(path string, form url.Values) (int, string, string) {
	b.t.Helper()
	form.Set("csrf", b.csrf)
	return b.do(http.MethodPost, path, form)
}

func TestSignInSessionAndSignOut(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()

	// Signed out, a page sends the browser to sign in, keeping where it was.
	st, loc, _ := b.do(http.MethodGet, "/ui/links?q=x", nil)
	if st != http.StatusSeeOther || loc != "/ui/login?next=%2Fui%2Flinks%3Fq%3Dx" {
		t.Fatalf("signed out: %d %q", st, loc)
	}
	// A wrong key: 401, the form again, no cookie.
	st, _, body := b.login(url.Values{"key": {"lr_nope"}})
	if st != http.StatusUnauthorized || !strings.Contains(body, "unknown or revoked") {
		t.Fatalf("wrong key: %d %s", st, body)
	}
	if u, _ := url.Parse(s.srv.URL + "/ui/"); len(b.c.Jar.Cookies(u)) != 0 {
		t.Fatal("a wrong key got a cookie")
	}
	// The right key: a cookie that names the key ID, never the secret.
	b.signIn(s.admin)
	fresh := s.browser()
	fresh.login(url.Values{"key": {s.admin}})
	var sc string
	for _, c := range fresh.hdr.Values("Set-Cookie") {
		if strings.HasPrefix(c, "linkraft_session=") {
			sc = c
		}
	}
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/ui/", "Max-Age="} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, s.admin) || strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q holds the secret, or is Secure over plain HTTP", sc)
	}
	// The sign-in form's own token: without it, or with another
	// browser's, the key is not taken (a site cannot sign a browser in).
	other := s.browser()
	other.do(http.MethodGet, "/ui/login", nil)
	for name, tok := range map[string]string{"no": "", "another browser's": other.csrf} {
		nb := s.browser()
		nb.do(http.MethodGet, "/ui/login", nil)
		st, _, _ := nb.do(http.MethodPost, "/ui/login", url.Values{"key": {s.admin}, "csrf": {tok}})
		if u, _ := url.Parse(s.srv.URL + "/ui/"); st != http.StatusForbidden || len(nb.c.Jar.Cookies(u)) != 0 {
			t.Errorf("sign-in with %s token: %d", name, st)
		}
	}
	// A stranger's huge sign-in body is read no further than 4 KiB and
	// signs no one in.
	huge := s.browser()
	huge.do(http.MethodGet, "/ui/login", nil)
	if st, _, _ := huge.do(http.MethodPost, "/ui/login", url.Values{"csrf": {huge.csrf}, "key": {s.admin}, "pad": {strings.Repeat("x", 1<<20)}}); st == http.StatusSeeOther {
		t.Fatal("a 1 MiB sign-in body was taken")
	}
	// A return address is kept inside the UI.
	for next, want := range map[string]string{"/ui/links": "/ui/links", "/ui/links?q=a%20b": "/ui/links?q=a%20b", "//evil.example/": "/ui/",
		"/ui//evil.example": "/ui/", "https://evil.example/ui/": "/ui/", "/ui/../abc": "/ui/", "/ui/%2e%2e/abc": "/ui/",
		"/ui/links\t": "/ui/", "/ui/\\evil.example": "/ui/", "/ui/./links": "/ui/"} {
		_, loc, _ := s.browser().login(url.Values{"key": {s.admin}, "next": {next}})
		if loc != want {
			t.Errorf("next %q: went to %q, want %q", next, loc, want)
		}
	}
	// Sign out: the cookie is cleared and pages ask to sign in again.
	if st, loc, _ := b.post("/ui/logout", url.Values{}); st != http.StatusSeeOther || loc != "/ui/login" {
		t.Fatalf("sign out: %d %q", st, loc)
	}
	if st, _, _ := b.do(http.MethodGet, "/ui/", nil); st != http.StatusSeeOther {
		t.Fatalf("after sign-out: %d", st)
	}
}

func TestSessionsEndWithTheirKeyAndTheirTime(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	secret, k, err := s.node.Keys().Create(ctx, apikey.Request{Name: "alice", Owner: "alice", Scopes: apikey.LinksRead | apikey.LinksWrite})
	if err != nil {
		t.Fatal(err)
	}
	b := s.browser()
	b.signIn(secret)
	// A forged cookie (another key's ID under this one's MAC) is refused.
	u, _ := url.Parse(s.srv.URL + "/ui/")
	good := b.c.Jar.Cookies(u)[0].Value
	parts := strings.Split(good, ".")
	if len(parts) != 5 {
		t.Fatalf("cookie %q", good)
	}
	admin, _ := s.node.Keys().Authenticate(s.admin)
	forged := s.browser()
	forged.c.Jar.SetCookies(u, []*http.Cookie{{Name: "linkraft_session", Value: strings.Join([]string{parts[0], admin.ID, parts[2], parts[3], parts[4]}, "."), Path: "/ui/"}})
	if st, _, _ := forged.do(http.MethodGet, "/ui/admin/keys", nil); st != http.StatusSeeOther {
		t.Fatalf("a forged cookie was let in: %d", st)
	}
	// A forged cookie for an ID that exists nowhere is refused the same
	// way: nothing tells which key IDs exist.
	unknown := s.browser()
	unknown.c.Jar.SetCookies(u, []*http.Cookie{{Name: "linkraft_session", Value: strings.Join([]string{parts[0], "k0000000000000000", parts[2], parts[3], parts[4]}, "."), Path: "/ui/"}})
	if st, loc, _ := unknown.do(http.MethodGet, "/ui/", nil); st != http.StatusSeeOther || strings.Contains(loc, "why=") {
		t.Fatalf("a forged cookie with an unknown ID: %d %q", st, loc)
	}
	// A later expiry written by the client breaks the MAC.
	late := s.browser()
	late.c.Jar.SetCookies(u, []*http.Cookie{{Name: "linkraft_session", Value: strings.Join([]string{parts[0], parts[1], "99999999999", parts[3], parts[4]}, "."), Path: "/ui/"}})
	if st, _, _ := late.do(http.MethodGet, "/ui/", nil); st != http.StatusSeeOther {
		t.Fatalf("a cookie with a rewritten expiry was let in: %d", st)
	}
	// Past its time the session ends.
	*s.now = s.now.Add(webui.DefaultSessionTTL + time.Second)
	if st, loc, _ := b.do(http.MethodGet, "/ui/", nil); st != http.StatusSeeOther || !strings.Contains(loc, "why=expired") {
		t.Fatalf("expired session: %d %q", st, loc)
	}
	*s.now = time.Now()
	b.signIn(secret)
	// Revoking the key ends its sessions at once.
	if err := s.node.Keys().Revoke(ctx, k.ID); err != nil {
		t.Fatal(err)
	}
	if st, loc, _ := b.do(http.MethodGet, "/ui/links", nil); st != http.StatusSeeOther || !strings.Contains(loc, "why=revoked") {
		t.Fatalf("revoked key's session: %d %q", st, loc)
	}
	if st, _, _ := b.post("/ui/links", url.Values{"url": {"https://example.com/"}}); st != http.StatusUnauthorized {
		t.Fatalf("revoked key's write: %d", st)
	}
}

func TestWritesNeedTheirTokenAndTheirOrigin(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	count := func() int {
		var n int
		page, err := s.node.Links().List(context.Background(), link.ListQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		n = len(page.Links)
		return n
	}
	form := url.Values{"url": {"https://example.com/csrf"}}
	// No token, a wrong token, another session's token: refused, nothing stored.
	other := s.browser()
	other.signIn(s.admin)
	for name, tok := range map[string]string{"none": "", "wrong": "AAAA", "another session's": other.csrf} {
		f := url.Values{"url": form["url"], "csrf": {tok}}
		if st, _, _ := b.do(http.MethodPost, "/ui/links", f); st != http.StatusForbidden {
			t.Errorf("%s token: %d, want 403", name, st)
		}
	}
	// The right token from another site (the cookie is SameSite=Strict, but
	// an older browser might send it): refused by origin.
	f := url.Values{"url": form["url"], "csrf": {b.csrf}}
	if st, _, _ := b.do(http.MethodPost, "/ui/links", f, "Sec-Fetch-Site", "cross-site"); st != http.StatusForbidden {
		t.Errorf("cross-site post: %d, want 403", st)
	}
	if st, _, _ := b.do(http.MethodPost, "/ui/links", f, "Sec-Fetch-Site", "", "Origin", "https://evil.example"); st != http.StatusForbidden {
		t.Errorf("post with a foreign Origin: %d, want 403", st)
	}
	if n := count(); n != 0 {
		t.Fatalf("%d links stored by refused writes", n)
	}
	// The same form, done right, works.
	if st, loc, body := b.post("/ui/links", url.Values{"url": form["url"]}); st != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/links/") {
		t.Fatalf("create: %d %q %s", st, loc, body)
	}
	if n := count(); n != 1 {
		t.Fatalf("%d links after one create", n)
	}
}

func TestShortenShowsTheAPIsProblemsBesideTheirFields(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	for _, c := range []struct {
		form  url.Values
		field string
		says  string
	}{
		{url.Values{"url": {"javascript:alert(1)"}}, "url", "http"},
		{url.Values{"url": {"https://example.com/"}, "alias": {"api"}}, "alias", "reserved"},
		{url.Values{"url": {"https://example.com/"}, "expires_at": {"2001-01-01T00:00"}}, "expires_at", "past"},
		{url.Values{"url": {"https://example.com/"}, "expires_at": {"soon"}}, "expires_at", "UTC"},
		{url.Values{"url": {"https://example.com/"}, "max_visits": {"0"}}, "max_visits", "1 to 1000000"},
		{url.Values{"url": {"https://example.com/"}, "password": {"short"}}, "password", "8"},
		{url.Values{"url": {"https://example.com/"}, "rules": {"planet=mars https://example.org/"}}, "rules", "no condition"},
		{url.Values{"url": {"https://example.com/"}, "rules": {"country=FR https://example.fr/\r\n\r\ndevice=fridge https://example.org/"}}, "rules", "line 3: "},
	} {
		st, _, body := b.post("/ui/links", c.form)
		if st != http.StatusUnprocessableEntity {
			t.Errorf("%v: %d, want 422", c.form, st)
			continue
		}
		m := regexp.MustCompile(`<small id="h-` + c.field + `" class="field-error">([^<]*)</small>`).FindStringSubmatch(body)
		if m == nil || !strings.Contains(m[1], c.says) {
			t.Errorf("%v: no error beside %s saying %q (got %v)", c.form, c.field, c.says, m)
		}
		if !strings.Contains(body, `id="f-`+c.field+`"`) || !strings.Contains(body, `aria-invalid="true"`) {
			t.Errorf("%v: the field is not marked invalid", c.form)
		}
	}
	// What the user typed stays in the form (but never the password).
	_, _, body := b.post("/ui/links", url.Values{"url": {"https://example.com/keep"}, "alias": {"api"}, "password": {"hunter2hunter2"}, "title": {"Kept <b>"}})
	if !strings.Contains(body, `value="https://example.com/keep"`) || !strings.Contains(body, `value="Kept &lt;b&gt;"`) || strings.Contains(body, "hunter2hunter2") {
		t.Error("the form did not keep what was typed, escaped, without the password")
	}
	// A duplicate alias is a field error too.
	if st, _, _ := b.post("/ui/links", url.Values{"url": {"https://example.com/"}, "alias": {"taken"}}); st != http.StatusSeeOther {
		t.Fatalf("first alias: %d", st)
	}
	st, _, body := b.post("/ui/links", url.Values{"url": {"https://example.com/"}, "alias": {"taken"}})
	if st != http.StatusUnprocessableEntity || !strings.Contains(body, `id="h-alias" class="field-error"`) {
		t.Fatalf("duplicate alias: %d %s", st, body)
	}
}

func TestLinkPagesManageALink(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	st, loc, _ := b.post("/ui/links", url.Values{"url": {"https://example.com/a"}, "alias": {"alpha"}, "tags": {"x, y"}, "title": {"Alpha"}})
	if st != http.StatusSeeOther || loc != "/ui/links/alpha?done=created" {
		t.Fatalf("create: %d %q", st, loc)
	}
	st, _, body := b.do(http.MethodGet, loc, nil)
	for _, want := range []string{"Link created.", `value="` + "http://localhost:8080/alpha" + `"`, `/alpha/qr?format=svg`, `/alpha+`, "Alpha", "x, y"} {
		if !strings.Contains(body, want) {
			t.Errorf("link page (%d) lacks %q", st, want)
		}
	}
	// Edit: a new destination and title, the tags cleared.
	st, loc, body = b.post("/ui/links/alpha", url.Values{"url": {"https://example.com/b"}, "title": {"Beta"}, "tags": {""}, "redirect": {"301"}})
	if st != http.StatusSeeOther {
		t.Fatalf("edit: %d %s", st, body)
	}
	l, err := s.node.Links().Get(context.Background(), "alpha", true)
	if err != nil || l.URL != "https://example.com/b" || l.Title != "Beta" || len(l.Tags) != 0 || l.Redirect != 301 {
		t.Fatalf("after edit: %+v %v", l, err)
	}
	// A bad edit shows the problem beside the field and changes nothing.
	st, _, body = b.post("/ui/links/alpha", url.Values{"url": {"ftp://example.com/"}, "title": {"Gamma"}})
	if st != http.StatusUnprocessableEntity || !strings.Contains(body, `id="h-url" class="field-error"`) {
		t.Fatalf("bad edit: %d", st)
	}
	if l, _ := s.node.Links().Get(context.Background(), "alpha", true); l.Title != "Beta" {
		t.Fatalf("a refused edit changed the link: %+v", l)
	}
	// Turn off, then on.
	b.post("/ui/links/alpha", url.Values{"op": {"disable"}})
	if l, _ := s.node.Links().Get(context.Background(), "alpha", true); !l.Disabled {
		t.Fatal("turn off did not")
	}
	// The list finds it; bulk turns it on; delete removes it.
	for i := range 3 {
		b.post("/ui/links", url.Values{"url": {"https://example.com/" + string(rune('c'+i))}, "tags": {"bulk"}})
	}
	_, _, body = b.do(http.MethodGet, "/ui/links?q=alpha", nil)
	if !strings.Contains(body, `href="/ui/links/alpha"`) || strings.Count(body, `name="code"`) != 1 {
		t.Fatalf("search for alpha listed %d links", strings.Count(body, `name="code"`))
	}
	_, _, body = b.do(http.MethodGet, "/ui/links?tag=bulk", nil)
	if strings.Count(body, `name="code"`) != 3 {
		t.Fatalf("tag filter listed %d links, want 3", strings.Count(body, `name="code"`))
	}
	st, _, body = b.post("/ui/links/bulk", url.Values{"code": {"alpha"}, "action": {"enable"}})
	if st != http.StatusOK || !strings.Contains(body, "Enabled 1 link(s).") {
		t.Fatalf("bulk enable: %d", st)
	}
	if l, _ := s.node.Links().Get(context.Background(), "alpha", true); l.Disabled {
		t.Fatal("bulk enable did not")
	}
	if st, loc, _ := b.post("/ui/links/alpha/delete", url.Values{}); st != http.StatusSeeOther || loc != "/ui/links?deleted=alpha" {
		t.Fatalf("delete: %d %q", st, loc)
	}
	if l, err := s.node.Links().Get(context.Background(), "alpha", true); err == nil && !l.Deleted {
		t.Fatal("the link survived its delete")
	}
	// Pages of another owner's link answer as for no link at all.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	secret, _, err := s.node.Keys().Create(ctx, apikey.Request{Name: "bob", Owner: "bob", Scopes: apikey.LinksRead | apikey.LinksWrite})
	if err != nil {
		t.Fatal(err)
	}
	bob := s.browser()
	bob.signIn(secret)
	_, loc, _ = b.post("/ui/links", url.Values{"url": {"https://example.com/ops-only"}})
	code := strings.TrimSuffix(strings.TrimPrefix(loc, "/ui/links/"), "?done=created")
	if st, _, _ := bob.do(http.MethodGet, "/ui/links/"+code, nil); st != http.StatusNotFound {
		t.Fatalf("another owner's link page: %d", st)
	}
	if st, _, _ := bob.post("/ui/links/"+code+"/delete", url.Values{}); st != http.StatusNotFound {
		t.Fatalf("another owner's delete: %d", st)
	}
	if st, _, body := bob.do(http.MethodGet, "/ui/admin/keys", nil); st != http.StatusForbidden || !strings.Contains(body, "may not") {
		t.Fatalf("a non-admin on the keys page: %d", st)
	}
}

func TestAdminPages(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	st, _, body := b.post("/ui/admin/keys", url.Values{"name": {"ci"}, "owner": {"team"}, "scopes": {"links:read", "links:write"}})
	m := regexp.MustCompile(`id="secret" value="([^"]+)"`).FindStringSubmatch(body)
	if st != http.StatusCreated || m == nil {
		t.Fatalf("create key: %d", st)
	}
	k, err := s.node.Keys().Authenticate(m[1])
	if err != nil || k.Name != "ci" || k.Owner != "team" {
		t.Fatalf("the shown secret is not the new key: %+v %v", k, err)
	}
	_, _, body = b.do(http.MethodGet, "/ui/admin/keys", nil)
	if strings.Contains(body, m[1]) || !strings.Contains(body, k.ID) {
		t.Fatal("the key list shows a secret, or not the new key")
	}
	if st, _, _ := b.post("/ui/admin/keys", url.Values{"name": {""}, "owner": {"team"}, "scopes": {"links:read"}}); st != http.StatusUnprocessableEntity {
		t.Fatalf("a key without a name: %d", st)
	}
	if st, _, _ := b.post("/ui/admin/keys/"+k.ID+"/revoke", url.Values{}); st != http.StatusSeeOther {
		t.Fatalf("revoke: %d", st)
	}
	if _, err := s.node.Keys().Authenticate(m[1]); err == nil {
		t.Fatal("the revoked key still works")
	}
	if st, _, body := b.post("/ui/admin/blocklist", url.Values{"domain": {"evil.example"}}); st != http.StatusOK || !strings.Contains(body, "evil.example") {
		t.Fatalf("block: %d", st)
	}
	if !s.node.Keys().Blocked("www.evil.example") {
		t.Fatal("the domain is not blocked")
	}
	if st, _, _ := b.post("/ui/admin/blocklist/evil.example/remove", url.Values{}); st != http.StatusOK || s.node.Keys().Blocked("evil.example") {
		t.Fatalf("unblock: %d", st)
	}
	st, _, body = b.do(http.MethodGet, "/ui/admin/cluster", nil)
	if st != http.StatusOK || !strings.Contains(body, "<td>n1</td>") || !strings.Contains(body, `hx-trigger="every 3s"`) {
		t.Fatalf("cluster page: %d", st)
	}
	st, _, body = b.do(http.MethodGet, "/ui/admin/cluster?part=1", nil)
	if st != http.StatusOK || strings.Contains(body, "<html") || !strings.Contains(body, "<td>n1</td>") {
		t.Fatalf("cluster part: %d", st)
	}
}

func TestPagesAreLockedDownAndSmall(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	// A browser at / goes to the UI; an API client still gets JSON.
	if st, loc, _ := b.do(http.MethodGet, "/", nil); st != http.StatusSeeOther || loc != "/ui/" {
		t.Fatalf("browser at /: %d %q", st, loc)
	}
	resp, err := http.Get(s.srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("API client at /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Browsers ask every site for /favicon.ico: it is the UI's icon.
	resp, err = http.Get(s.srv.URL + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Fatalf("/favicon.ico: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// The sign-in page: a strict CSP, no framing, no caching.
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/ui/login", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	h := resp.Header
	if !strings.Contains(h.Get("Content-Security-Policy"), "script-src 'self'") || h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("sign-in page headers: %v", h)
	}
	// First load: the page and every file it names, compressed, under 100 KB.
	total := len(page)
	zr, err := gzip.NewReader(strings.NewReader(string(page)))
	if err != nil {
		t.Fatalf("the page is not gzipped: %v", err)
	}
	html, _ := io.ReadAll(zr)
	refs := regexp.MustCompile(`(?:href|src)="(/ui/static/[^"]+)"`).FindAllStringSubmatch(string(html), -1)
	if len(refs) < 3 {
		t.Fatalf("the page names %d static files", len(refs))
	}
	for _, ref := range refs {
		req, _ := http.NewRequest(http.MethodGet, s.srv.URL+strings.ReplaceAll(ref[1], "&amp;", "&"), nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
			t.Errorf("%s: %d %q", ref[1], resp.StatusCode, resp.Header.Get("Cache-Control"))
		}
		total += int(n)
	}
	t.Logf("first load: %d bytes compressed, %d files", total, len(refs)+1)
	if total > 100<<10 {
		t.Errorf("first load is %d bytes compressed, over 100 KB", total)
	}
	// No page but the sign-in page and the static files answers without
	// a session, and unknown UI paths are HTML 404s.
	if st, _, _ := b.do(http.MethodGet, "/ui/nope", nil); st != http.StatusNotFound {
		t.Fatalf("unknown page: %d", st)
	}
	if st, _, _ := b.do(http.MethodGet, "/ui/static/vendor/SHA256SUMS", nil); st != http.StatusNotFound {
		t.Fatalf("the checksum list is served: %d", st)
	}
	if st, _, _ := b.do(http.MethodDelete, "/ui/links/x", nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("DELETE on a page: %d", st)
	}
	// A huge form body is cut off: 413, said on a signed-in page.
	b.signIn(s.admin)
	big := url.Values{"url": {"https://example.com/"}, "note": {strings.Repeat("x", 1<<20)}}
	if st, _, body := b.post("/ui/links", big); st != http.StatusRequestEntityTooLarge || !strings.Contains(body, "Sign out") {
		t.Fatalf("a 1 MiB form: %d", st)
	}
	// What reaches the API's path is only ever a code.
	for _, p := range []string{"/ui/links/xx1%2Fstats", "/ui/links/%2e%2e", "/ui/links/a%20b/stats"} {
		if st, _, _ := b.do(http.MethodGet, p, nil); st != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, st)
		}
	}
}

// TestVendoredFilesAreThePinnedOnes: the vendored libraries are the bytes
// scripts/vendor-ui.sh fetched and checked; an edit by hand fails here.
func TestVendoredFilesAreThePinnedOnes(t *testing.T) {
	t.Parallel()
	sums, err := os.ReadFile("static/vendor/SHA256SUMS")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	if len(lines) < 7 {
		t.Fatalf("SHA256SUMS lists %d files", len(lines))
	}
	for _, line := range lines {
		want, name, ok := strings.Cut(line, "  ")
		if !ok {
			t.Fatalf("bad line %q", line)
		}
		b, err := os.ReadFile("static/vendor/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != want {
			t.Errorf("%s: sha256 %s, pinned %s", name, got, want)
		}
	}
}

func TestImportAndExport(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	upload := func(parts ...[2]string) (int, string) {
		var body bytes.Buffer
		mw := multipart.NewWriter(&body)
		for _, p := range parts {
			if p[0] == "file" {
				w, _ := mw.CreateFormFile("file", "links.csv")
				w.Write([]byte(p[1]))
				continue
			}
			mw.WriteField(p[0], p[1])
		}
		mw.Close()
		req, _ := http.NewRequest(http.MethodPost, s.srv.URL+"/ui/import", &body)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := b.c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(raw)
	}
	csv := "url,alias,tags\nhttps://example.com/1,imp-one,a\nhttps://example.com/2,imp-two,a\njavascript:alert(1),imp-bad,\n"
	// Without the token first, nothing is read or stored.
	if st, _ := upload([2]string{"file", csv}, [2]string{"csrf", b.csrf}); st != http.StatusForbidden {
		t.Fatalf("import with the file before the token: %d", st)
	}
	if st, _ := upload([2]string{"csrf", "nope"}, [2]string{"file", csv}); st != http.StatusForbidden {
		t.Fatalf("import with a wrong token: %d", st)
	}
	if _, err := s.node.Links().Get(context.Background(), "imp-one", true); err == nil {
		t.Fatal("a refused import stored a link")
	}
	st, body := upload([2]string{"csrf", b.csrf}, [2]string{"file", csv})
	if st != http.StatusOK || !strings.Contains(body, "Imported 2 of 3 row(s); 1 failed.") || !strings.Contains(body, "row 3:") {
		t.Fatalf("import: %d %s", st, body)
	}
	if l, err := s.node.Links().Get(context.Background(), "imp-two", true); err != nil || l.URL != "https://example.com/2" {
		t.Fatalf("imported link: %+v %v", l, err)
	}
	// Not a file of links: the API's reason.
	if st, body := upload([2]string{"csrf", b.csrf}, [2]string{"file", "\x00\x01garbage"}); st != http.StatusBadRequest || !strings.Contains(body, "CSV") {
		t.Fatalf("import of garbage: %d", st)
	}
	// Export streams a file the import takes back.
	req, _ := http.NewRequest(http.MethodGet, s.srv.URL+"/ui/export?format=csv", nil)
	resp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Disposition"), "attachment") ||
		!strings.Contains(string(raw), "imp-one") || !strings.Contains(string(raw), "imp-two") {
		t.Fatalf("export: %d %q %s", resp.StatusCode, resp.Header.Get("Content-Disposition"), raw)
	}
	if st, _, _ := b.do(http.MethodGet, "/ui/export?format=xml", nil); st != http.StatusBadRequest {
		t.Fatalf("export as xml: %d", st)
	}
}

func TestListPagesAndTheKeysRateLimit(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 30 {
		if _, err := s.node.Links().Create(ctx, link.CreateRequest{URL: fmt.Sprintf("https://example.com/p/%d", i), Owner: "carol"}); err != nil {
			t.Fatal(err)
		}
	}
	// A key with its own limit of 2 requests a second (burst as the API
	// gives it): the UI's calls spend it like curl's would.
	secret, _, err := s.node.Keys().Create(ctx, apikey.Request{Name: "carol", Owner: "carol", Scopes: apikey.LinksRead | apikey.LinksWrite, RateLimit: 2})
	if err != nil {
		t.Fatal(err)
	}
	b := s.browser()
	b.signIn(secret)
	st, _, body := b.do(http.MethodGet, "/ui/links", nil)
	if st != http.StatusOK {
		t.Fatalf("first page: %d", st)
	}
	first := strings.Count(body, `name="code"`)
	m := regexp.MustCompile(`href="(/ui/links\?cursor=[^"]+)"`).FindStringSubmatch(body)
	if first != 25 || m == nil {
		t.Fatalf("first page: %d links, next %v", first, m)
	}
	// Pages until the limit bites: the page says so, with 429.
	limited := false
	for range 50 {
		st, _, body = b.do(http.MethodGet, strings.ReplaceAll(m[1], "&amp;", "&"), nil)
		if st == http.StatusTooManyRequests {
			limited = strings.Contains(body, "role=\"alert\"")
			break
		}
		if st != http.StatusOK || strings.Count(body, `name="code"`) != 5 {
			t.Fatalf("second page: %d, %d links", st, strings.Count(body, `name="code"`))
		}
	}
	if !limited {
		t.Fatal("50 pages in a row never met the key's rate limit of 2/s")
	}
}

func TestHtmxAddressesAndRedirects(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	// Without a session an htmx request is told where to go (a 3xx would
	// be followed by the browser unseen), and a fragment is no place to
	// come back to.
	if st, _, _ := b.do(http.MethodGet, "/ui/admin/cluster?part=1", nil, "HX-Request", "true"); st != http.StatusNoContent ||
		b.hdr.Get("HX-Redirect") != "/ui/login" {
		t.Fatalf("fragment without a session: %d %q", st, b.hdr.Get("HX-Redirect"))
	}
	if st, _, _ := b.do(http.MethodGet, "/ui/links", nil, "HX-Request", "true", "HX-Boosted", "true"); st != http.StatusNoContent ||
		b.hdr.Get("HX-Redirect") != "/ui/login?next=%2Fui%2Flinks" {
		t.Fatalf("boosted page without a session: %d %q", st, b.hdr.Get("HX-Redirect"))
	}
	b.signIn(s.admin)
	// The cluster's refresh pushes no address; a boosted page read pushes
	// its own; a form's answer the page it stands for; errors none.
	b.do(http.MethodGet, "/ui/admin/cluster?part=1", nil, "HX-Request", "true")
	if v := b.hdr.Values("HX-Push-Url"); len(v) != 0 {
		t.Fatalf("the cluster refresh pushes %v", v)
	}
	b.do(http.MethodGet, "/ui/links?q=x", nil, "HX-Request", "true", "HX-Boosted", "true")
	if v := b.hdr.Get("HX-Push-Url"); v != "/ui/links?q=x" {
		t.Fatalf("a boosted page pushes %q", v)
	}
	b.do(http.MethodPost, "/ui/links/bulk?q=x", url.Values{"csrf": {b.csrf}, "code": {"nope1"}, "action": {"disable"}}, "HX-Request", "true", "HX-Boosted", "true")
	if v := b.hdr.Get("HX-Push-Url"); v != "/ui/links?q=x" {
		t.Fatalf("a bulk action's answer pushes %q", v)
	}
	b.do(http.MethodPost, "/ui/links", url.Values{"csrf": {b.csrf}, "url": {"ftp://x"}}, "HX-Request", "true", "HX-Boosted", "true")
	if v := b.hdr.Get("HX-Push-Url"); v != "false" {
		t.Fatalf("a refused form pushes %q", v)
	}
	// The page with a new key's secret is kept by no cache.
	b.post("/ui/admin/keys", url.Values{"name": {"x"}, "owner": {"x"}, "scopes": {"links:read"}})
	if b.hdr.Get("Cache-Control") != "no-store" {
		t.Fatalf("the new key's page: Cache-Control %q", b.hdr.Get("Cache-Control"))
	}
}

func TestEditsKeepWhatTheyDoNotChange(t *testing.T) {
	t.Parallel()
	s := newSite(t)
	b := s.browser()
	b.signIn(s.admin)
	// Lines typed without script arrive as CRLF and are stored as LF.
	if st, _, body := b.post("/ui/links", url.Values{"url": {"https://example.com/"}, "alias": {"lines"}, "description": {"one\r\ntwo"}}); st != http.StatusSeeOther {
		t.Fatalf("create with lines: %d %s", st, body)
	}
	if l, _ := s.node.Links().Get(context.Background(), "lines", true); l.Description != "one\ntwo" {
		t.Fatalf("description %q", l.Description)
	}
	// A link that has expired stays editable, and its expiry is kept to
	// the second when the field is left alone.
	exp := time.Now().Add(1500 * time.Millisecond).Truncate(time.Second).Add(1234 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.node.Links().Create(ctx, link.CreateRequest{URL: "https://example.com/soon", Alias: "soon", Owner: "ops", ExpiresAt: exp}); err != nil {
		t.Fatal(err)
	}
	for time.Now().Before(exp.Add(10 * time.Millisecond)) {
		time.Sleep(50 * time.Millisecond) // the link's expiry is wall-clock time
	}
	_, _, page := b.do(http.MethodGet, "/ui/links/soon", nil)
	was := regexp.MustCompile(`name="expires_was" value="([^"]*)"`).FindStringSubmatch(page)
	if was == nil || was[1] == "" {
		t.Fatal("the edit form lacks the expiry it showed")
	}
	st, _, body := b.post("/ui/links/soon", url.Values{"url": {"https://example.com/later"}, "expires_at": {was[1]}, "expires_was": {was[1]}})
	if st != http.StatusSeeOther {
		t.Fatalf("edit of an expired link: %d %s", st, body)
	}
	l, _ := s.node.Links().Get(context.Background(), "soon", true)
	if l.URL != "https://example.com/later" || !l.ExpiresAt.Equal(exp.Truncate(time.Millisecond)) {
		t.Fatalf("after the edit: %s, expires %v (was %v)", l.URL, l.ExpiresAt, exp)
	}
	// Non-admins meet 403 on every admin page.
	secret, _, err := s.node.Keys().Create(ctx, apikey.Request{Name: "dan", Owner: "dan", Scopes: apikey.LinksRead})
	if err != nil {
		t.Fatal(err)
	}
	dan := s.browser()
	dan.signIn(secret)
	for _, p := range []string{"/ui/admin/keys", "/ui/admin/blocklist", "/ui/admin/cluster"} {
		if st, _, _ := dan.do(http.MethodGet, p, nil); st != http.StatusForbidden {
			t.Errorf("a non-admin at %s: %d", p, st)
		}
	}
	if st, _, _ := dan.post("/ui/admin/blocklist", url.Values{"domain": {"x.example"}}); st == http.StatusOK || s.node.Keys().Blocked("x.example") {
		t.Errorf("a non-admin blocked a domain: %d", st)
	}
}
