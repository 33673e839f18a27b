package httpapi_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/link"
)

// lockedBuffer is a log sink tests read while the server writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func form(pw string) []byte { return []byte(url.Values{"password": {pw}}.Encode()) }

const formType = "application/x-www-form-urlencoded"

// TestPasswordLinks: a password link on a real node (Raft, bbolt) asks
// for its password (never through the fast path), redirects with 303 on
// the right one, refuses a wrong one, and neither the password nor its
// hash appears in any answer or log line; what is stored is the argon2id
// hash. Removing the password makes it an open link again.
func TestPasswordLinks(t *testing.T) {
	t.Parallel()
	const secret = "Tr0ub4dor&3 horse"
	logs := &lockedBuffer{}
	tn := startNodeAPI(t, link.URLPolicy{}, func(c *httpapi.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	var answers []string // every answer body and header, to search for secrets
	keep := func(r response) response {
		answers = append(answers, string(r.body), fmt.Sprint(r.header))
		return r
	}
	made := keep(tn.postJSON(t, "/api/v1/links", `{"url":"https://example.com/vault?a=1","alias":"locked","password":"`+secret+`","title":"the vault"}`))
	if made.status != 201 || made.json(t)["password_protected"] != true {
		t.Fatalf("create: %d %s", made.status, made.body)
	}

	for _, method := range []string{"GET", "HEAD"} {
		r := keep(tn.do(t, method, "/locked", "", nil, "Authorization", "", "Accept", "text/html"))
		if r.status != 200 || r.header.Get("Location") != "" || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") ||
			r.header.Get("Cache-Control") != "no-store" || !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") ||
			strings.Contains(r.header.Get("Content-Security-Policy"), "form-action") {
			t.Fatalf("%s /locked: %d %v", method, r.status, r.header)
		}
		if method == "GET" && (!strings.Contains(string(r.body), `<form method="post">`) || strings.Contains(string(r.body), "example.com")) {
			t.Fatalf("the password page:\n%s", r.body)
		}
	}
	// Nothing in the preview says where it goes.
	if r := keep(tn.do(t, "GET", "/locked+", "", nil, "Authorization", "")); r.status != 200 ||
		strings.Contains(string(r.body), "example.com") || strings.Contains(string(r.body), "the vault") {
		t.Fatalf("preview: %d\n%s", r.status, r.body)
	}

	if r := keep(tn.do(t, "POST", "/locked", formType, form("wrong"), "Authorization", "")); r.status != 403 || r.json(t)["type"] != "/problems/wrong-password" {
		t.Fatalf("wrong password: %d %s", r.status, r.body)
	}
	if r := keep(tn.do(t, "POST", "/locked", formType, form("wrong"), "Authorization", "", "Accept", "text/html")); r.status != 403 ||
		!strings.Contains(string(r.body), "not right") || r.header.Get("Location") != "" {
		t.Fatalf("wrong password, browser: %d %s", r.status, r.body)
	}
	r := keep(tn.do(t, "POST", "/locked?utm_source=mail", formType, form(secret), "Authorization", ""))
	if r.status != 303 || r.header.Get("Location") != "https://example.com/vault?a=1&utm_source=mail" {
		t.Fatalf("right password: %d %v %s", r.status, r.header, r.body)
	}

	// Only the hash is stored, and nothing shows it.
	if st := tn.storedState(t); !strings.Contains(st, "$argon2id$v=19$") || strings.Contains(st, secret) {
		t.Fatalf("stored: %s", st)
	}
	keep(tn.do(t, "GET", "/api/v1/links/locked", "", nil))
	keep(tn.do(t, "GET", "/api/v1/links", "", nil))
	keep(tn.do(t, "GET", "/api/v1/links/export?format=ndjson", "", nil))
	keep(tn.do(t, "GET", "/api/v1/links/export?format=csv", "", nil))
	for _, a := range answers {
		if strings.Contains(a, secret) || strings.Contains(a, "argon2") || strings.Contains(a, "Tr0ub4dor") {
			t.Fatalf("an answer shows the password or its hash: %s", a)
		}
	}

	// A wrong-shaped guess changes nothing and is told so.
	for _, c := range []struct {
		ct     string
		body   []byte
		status int
	}{
		{"application/json", []byte(`{"password":"x"}`), 415},
		{"", form(secret), 415},
		{formType, []byte("nothing=here"), 400},
		{formType, []byte("password=a&password=b"), 400},
		{formType, form(strings.Repeat("x", 129)), 400},
		{formType, []byte("password=" + strings.Repeat("x", 2000)), 413},
		{formType, []byte("%zz"), 400},
	} {
		if r := tn.do(t, "POST", "/locked", c.ct, c.body, "Authorization", ""); r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("POST %s %.40q: %d %s, want %d", c.ct, c.body, r.status, r.body, c.status)
		}
	}
	if r := tn.do(t, "POST", "/nope-nope", formType, form("x"), "Authorization", ""); r.status != 404 {
		t.Fatalf("unknown code: %d", r.status)
	}

	// Bad passwords on the API.
	for body, want := range map[string]string{
		`{"url":"https://example.com/","password":""}`:                                 "password",
		`{"url":"https://example.com/","password":"` + strings.Repeat("p", 129) + `"}`: "password",
		`{"url":"https://example.com/","password":7}`:                                  "password",
		// Shorter than password.MinLength (issue 26): a few guesses found it.
		`{"url":"https://example.com/","password":"1234567"}`: "password",
		`{"url":"https://example.com/","password":"x"}`:       "password",
	} {
		if r := tn.postJSON(t, "/api/v1/links", body); r.status != 400 || r.json(t)["field"] != want {
			t.Errorf("create %.60s: %d %s", body, r.status, r.body)
		}
	}
	if r := tn.do(t, "PATCH", "/api/v1/links/locked", "application/merge-patch+json", []byte(`{"password":"short"}`)); r.status != 400 || r.json(t)["field"] != "password" {
		t.Errorf("a patch to a 5-byte password: %d %s", r.status, r.body)
	}
	bulk := tn.postJSON(t, "/api/v1/links/bulk", `{"links":[{"url":"https://example.com/b","password":"pw-pw-pw-pw"}]}`)
	if bulk.status != 200 || bulk.json(t)["failed"] != float64(1) || !strings.Contains(string(bulk.body), `"field":"password"`) {
		t.Fatalf("a bulk create with a password: %d %s", bulk.status, bulk.body)
	}

	// null removes the password: an open link again, fast path and all.
	if r := tn.do(t, "PATCH", "/api/v1/links/locked", "application/merge-patch+json", []byte(`{"password":null}`)); r.status != 200 || r.json(t)["password_protected"] != false {
		t.Fatalf("remove the password: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/locked", "", nil, "Authorization", ""); r.status != 302 || r.header.Get("Location") != "https://example.com/vault?a=1" {
		t.Fatalf("open again: %d %v", r.status, r.header)
	}
	if r := tn.do(t, "PATCH", "/api/v1/links/locked", "application/merge-patch+json", []byte(`{"password":"another one"}`)); r.status != 200 || r.json(t)["password_protected"] != true {
		t.Fatalf("set a password: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/locked", "", nil, "Authorization", ""); r.status != 200 || r.header.Get("Location") != "" {
		t.Fatalf("locked again: %d %v", r.status, r.header)
	}
	if r := tn.do(t, "POST", "/locked", formType, form("another one"), "Authorization", ""); r.status != 303 {
		t.Fatalf("the new password: %d %s", r.status, r.body)
	}
	if strings.Contains(logs.String(), secret) || strings.Contains(logs.String(), "another one") || strings.Contains(logs.String(), "argon2") {
		t.Fatalf("the log shows a password:\n%s", logs)
	}

	// A limited link's visit is used up by the right password, not by the
	// page.
	tn.create(t, `{"url":"https://example.com/once","alias":"once-locked","password":"pw-pw-pw-pw","max_visits":1}`)
	for range 2 {
		if r := tn.do(t, "GET", "/once-locked", "", nil, "Authorization", ""); r.status != 200 {
			t.Fatalf("page of a limited link: %d", r.status)
		}
	}
	if r := tn.do(t, "POST", "/once-locked", formType, form("pw-pw-pw-pw"), "Authorization", ""); r.status != 303 {
		t.Fatalf("the one visit: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "POST", "/once-locked", formType, form("pw-pw-pw-pw"), "Authorization", ""); r.status != 410 {
		t.Fatalf("after the one visit: %d %s", r.status, r.body)
	}
}

// TestPasswordGuessesAreLimited: 5 guesses at once from one network, then
// 429 (even for the right password, so that stopping at a 429 tells
// nothing); and 20 at one link from networks that guessed it wrong before,
// then 429 for them but not for a network that has not.
// The server's clock stands still, so no bucket refills however slowly
// the guesses (an argon2id check each) run.
func TestPasswordGuessesAreLimited(t *testing.T) {
	t.Parallel()
	stopped := time.Now()
	tn := startFake(t, link.URLPolicy{}, func(c *httpapi.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.Now = func() time.Time { return stopped }
	})
	tn.create(t, `{"url":"https://example.com/a","alias":"guess-me","password":"right-one"}`)
	tn.create(t, `{"url":"https://example.com/b","alias":"guess-too","password":"right-one"}`)
	guess := func(code, ip, pw string) response {
		return tn.do(t, "POST", "/"+code, formType, form(pw), "Authorization", "", "X-Forwarded-For", ip)
	}
	for i := range 5 {
		if r := guess("guess-me", "198.51.100.7", "wrong"); r.status != 403 {
			t.Fatalf("guess %d: %d %s", i, r.status, r.body)
		}
	}
	r := guess("guess-me", "198.51.100.7", "right-one")
	if r.status != 429 || r.header.Get("Retry-After") == "" || r.json(t)["type"] != "/problems/rate-limited" {
		t.Fatalf("the 6th guess from one network: %d %v %s", r.status, r.header, r.body)
	}
	if r := guess("guess-me", "198.51.100.8", "right-one"); r.status != 303 {
		t.Fatalf("another network: %d %s", r.status, r.body)
	}
	// Per link: a network's first guess at a link spends only its own
	// budget; those that guessed wrong share the link's 20, then get 429.
	// A visitor from another network with the right password still gets
	// in: strangers cannot lock a link's visitors out (issue 26).
	for round := range 2 {
		for i := range 20 {
			if r := guess("guess-too", fmt.Sprintf("203.0.113.%d", i), "wrong"); r.status != 403 {
				t.Fatalf("round %d, guess %d at one link: %d %s", round, i, r.status, r.body)
			}
		}
	}
	if r := guess("guess-too", "203.0.113.0", "right-one"); r.status != 429 || !strings.Contains(r.header.Get("RateLimit-Policy"), "password-guesses-per-link") {
		t.Fatalf("a 41st guess at one link, from a network that guessed wrong: %d %v %s", r.status, r.header, r.body)
	}
	if r := guess("guess-too", "192.0.2.200", "right-one"); r.status != 303 {
		t.Fatalf("a visitor with the right password after 40 wrong guesses from 20 networks: %d %s", r.status, r.body)
	}
	if r := guess("guess-me", "192.0.2.201", "right-one"); r.status != 303 {
		t.Fatalf("another link stays open to its guessers: %d %s", r.status, r.body)
	}
}

// TestPasswordGuessesAreSharedByTheNodes: the per-link limit holds for the
// cluster: with 3 live nodes each allows 7 of the 20 guesses at a link at
// once, and with 10 each allows 5 (never fewer than one network's).
func TestPasswordGuessesAreSharedByTheNodes(t *testing.T) {
	t.Parallel()
	stopped := time.Now()
	var nodes atomic.Int32
	tn := startFake(t, link.URLPolicy{}, func(c *httpapi.Config) {
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
		c.Now = func() time.Time { return stopped }
		c.Admin = liveNodes{c.Admin, func() int { return int(nodes.Load()) }}
	})
	for _, c := range []struct{ nodes, share int }{{3, 7}, {10, 5}} {
		nodes.Store(int32(c.nodes))
		code := fmt.Sprintf("shared-%d", c.nodes)
		tn.create(t, `{"url":"https://example.com/a","alias":"`+code+`","password":"right-one"}`)
		guess := func(i int, pw string) response {
			return tn.do(t, "POST", "/"+code, formType, form(pw), "Authorization", "", "X-Forwarded-For", fmt.Sprintf("203.0.113.%d", i))
		}
		for i := range c.share + 1 { // first guesses: the link's budget is not spent
			if r := guess(i, "wrong"); r.status != 403 {
				t.Fatalf("%d nodes: first guess %d: %d %s", c.nodes, i, r.status, r.body)
			}
		}
		for i := range c.share {
			r := guess(i, "wrong")
			if r.status != 403 {
				t.Fatalf("%d nodes: guess %d: %d %s", c.nodes, i, r.status, r.body)
			}
			if i == 0 && !strings.Contains(r.header.Get("RateLimit-Policy"), fmt.Sprintf(`"password-guesses-per-link";q=%d;`, c.share)) {
				t.Fatalf("%d nodes: RateLimit-Policy %q", c.nodes, r.header.Values("RateLimit-Policy"))
			}
		}
		r := guess(c.share, "right-one")
		if r.status != 429 {
			t.Fatalf("%d nodes: guess %d at one link: %d %s", c.nodes, c.share+1, r.status, r.body)
		}
	}
}
