package httpapi_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// makeKey creates a key with the admin key and returns its id and secret.
func (tn *testNode) makeKey(tb testing.TB, name, owner string, scopes ...string) (string, string) {
	tb.Helper()
	sc, _ := json.Marshal(scopes)
	r := tn.postJSON(tb, "/api/v1/keys", fmt.Sprintf(`{"name":%q,"owner":%q,"scopes":%s}`, name, owner, sc))
	if r.status != http.StatusCreated {
		tb.Fatalf("create key %s: %d %s", name, r.status, r.body)
	}
	m := r.json(tb)
	return m["id"].(string), m["key"].(string)
}

func bearer(secret string) string { return "Bearer " + secret }

// TestEveryRouteRefusesWhoMayNot is the trust boundary of the HTTP API as a
// table: every route against no key, an unknown key, a revoked key, a key
// without the route's scope, another owner's key and an admin key. A refused
// request changes nothing stored.
func TestEveryRouteRefusesWhoMayNot(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	_, aliceRW := tn.makeKey(t, "alice-rw", "alice", "links:read", "links:write", "stats:read")
	_, aliceRO := tn.makeKey(t, "alice-ro", "alice", "links:read")
	_, aliceStats := tn.makeKey(t, "alice-stats", "alice", "stats:read")
	_, bob := tn.makeKey(t, "bob", "bob", "links:read", "links:write", "stats:read")
	revokedID, revoked := tn.makeKey(t, "gone", "alice", "links:read", "links:write", "stats:read")
	victimID, _ := tn.makeKey(t, "victim", "carol", "links:read")
	if r := tn.do(t, "DELETE", "/api/v1/keys/"+revokedID, "", nil); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	for _, alias := range []string{"alice-link", "alice-del"} {
		r := tn.do(t, "POST", "/api/v1/links", "application/json", []byte(`{"url":"https://example.com/`+alias+`","alias":"`+alias+`"}`), "Authorization", bearer(aliceRW))
		if r.status != 201 || r.json(t)["owner"] != "alice" {
			t.Fatalf("alice's create: %d %s", r.status, r.body)
		}
	}
	const js = "application/json"
	type who int
	const (
		none who = iota
		wrong
		gone
		lacking
		other
		admin
	)
	names := []string{"no key", "unknown key", "revoked key", "key lacking the scope", "another owner's key", "admin key"}
	type route struct {
		method, path, body string
		adminPort          bool
		lacking            string // a key of the right owner without the scope
		want               [6]int // by who
	}
	wantAdminOnly := [6]int{401, 401, 401, 403, 403, 0}
	routes := []route{
		{"POST", "/api/v1/links", `{"url":"https://example.com/new"}`, false, aliceRO, [6]int{401, 401, 401, 403, 201, 201}},
		{"POST", "/api/v1/links/bulk", `{"links":[{"url":"https://example.com/b"}]}`, false, aliceRO, [6]int{401, 401, 401, 403, 200, 200}},
		{"GET", "/api/v1/links", "", false, aliceStats, [6]int{401, 401, 401, 403, 200, 200}},
		{"GET", "/api/v1/tags", "", false, aliceStats, [6]int{401, 401, 401, 403, 200, 200}},
		{"GET", "/api/v1/links/export", "", false, aliceStats, [6]int{401, 401, 401, 403, 200, 200}},
		{"POST", "/api/v1/links/bulk-update", `{"codes":["alice-link"],"patch":{"tags":["y"]}}`, false, aliceRO, [6]int{401, 401, 401, 403, 200, 200}},
		{"POST", "/api/v1/links/bulk-delete", `{"codes":["no-such-link"]}`, false, aliceRO, [6]int{401, 401, 401, 403, 200, 200}},
		{"GET", "/api/v1/links/alice-link", "", false, aliceStats, [6]int{401, 401, 401, 403, 404, 200}},
		{"HEAD", "/api/v1/links/alice-link", "", false, aliceStats, [6]int{401, 401, 401, 403, 404, 200}},
		{"PATCH", "/api/v1/links/alice-link", `{"tags":["x"]}`, false, aliceRO, [6]int{401, 401, 401, 403, 404, 200}},
		{"DELETE", "/api/v1/links/alice-del", "", false, aliceRO, [6]int{401, 401, 401, 403, 404, 204}},
		{"GET", "/api/v1/links/alice-link/stats", "", false, aliceRO, [6]int{401, 401, 401, 403, 404, 200}},
		{"GET", "/api/v1/links/alice-link/visits", "", false, aliceRO, [6]int{401, 401, 401, 403, 404, 200}},
		{"GET", "/api/v1/orphan-visits", "", false, aliceRW, wantAdminOnly},
		{"POST", "/api/v1/keys", `{"name":"k","owner":"dave","scopes":["links:read"]}`, false, aliceRW, wantAdminOnly},
		{"GET", "/api/v1/keys", "", false, aliceRW, wantAdminOnly},
		{"DELETE", "/api/v1/keys/" + victimID, "", false, aliceRW, wantAdminOnly},
		{"POST", "/api/v1/blocklist", `{"domain":"bad.example"}`, false, aliceRW, wantAdminOnly},
		{"GET", "/api/v1/blocklist", "", false, aliceRW, wantAdminOnly},
		{"DELETE", "/api/v1/blocklist/bad.example", "", false, aliceRW, wantAdminOnly},
		{"GET", "/admin/v1/cluster", "", true, aliceRW, wantAdminOnly},
		{"GET", "/admin/v1/leases", "", true, aliceRW, wantAdminOnly},
		{"GET", "/admin/v1/links", "", true, aliceRW, wantAdminOnly},
		{"GET", "/admin/v1/digest", "", true, aliceRW, wantAdminOnly},
		{"DELETE", "/admin/v1/nodes/nobody", "", true, aliceRW, [6]int{401, 401, 401, 403, 403, 404}},
		{"POST", "/admin/v1/nodes/nobody/drain", "", true, aliceRW, [6]int{401, 401, 401, 403, 403, 404}},
		{"GET", "/admin/v1/nodes/nobody/drain", "", true, aliceRW, [6]int{401, 401, 401, 403, 403, 404}},
		{"DELETE", "/admin/v1/nodes/nobody/drain", "", true, aliceRW, [6]int{401, 401, 401, 403, 403, 404}},
	}
	adminWant := map[string]int{"POST /api/v1/keys": 201, "DELETE /api/v1/keys/" + victimID: 204, "POST /api/v1/blocklist": 201,
		"DELETE /api/v1/blocklist/bad.example": 204}
	for _, rt := range routes {
		for w := none; w <= admin; w++ {
			var auth string
			switch w {
			case none:
				auth = ""
			case wrong:
				auth = bearer("lrk_" + strings.Repeat("A", 43))
			case gone:
				auth = bearer(revoked)
			case lacking:
				auth = bearer(rt.lacking)
			case other:
				auth = bearer(bob)
			case admin:
				auth = bearer(tn.key)
			}
			want := rt.want[w]
			if want == 0 {
				want = 200
				if v, ok := adminWant[rt.method+" "+rt.path]; ok {
					want = v
				}
			}
			var body []byte
			ct := ""
			if rt.body != "" {
				body, ct = []byte(rt.body), js
			}
			before := tn.storedState(t)
			do := tn.do
			if rt.adminPort {
				do = tn.adminDo
			}
			r := do(t, rt.method, rt.path, ct, body, "Authorization", auth)
			if r.status != want {
				t.Errorf("%s %s with %s: %d, want %d: %s", rt.method, rt.path, names[w], r.status, want, r.body)
				continue
			}
			if want >= 400 {
				if after := tn.storedState(t); after != before {
					t.Errorf("%s %s with %s was refused but changed stored state", rt.method, rt.path, names[w])
				}
				if rt.method != "HEAD" && w != admin {
					p := r.json(t)
					kind := map[int]string{401: "unauthorized", 403: "forbidden", 404: "not-found"}[want]
					if kind != "" && p["type"] != "/problems/"+kind {
						t.Errorf("%s %s with %s: problem %s", rt.method, rt.path, names[w], r.body)
					}
				}
				if want == 401 && r.header.Get("WWW-Authenticate") == "" {
					t.Errorf("%s %s: 401 without WWW-Authenticate", rt.method, rt.path)
				}
			}
		}
	}
	// Another owner's link answers exactly as an unknown code does, live
	// or deleted (410 would tell bob the code was ever used).
	if r := tn.do(t, "DELETE", "/api/v1/links/alice-gone", "", nil, "Authorization", bearer(aliceRW)); r.status != 404 {
		t.Fatalf("delete of a code never created: %d", r.status)
	}
	tn.do(t, "POST", "/api/v1/links", js, []byte(`{"url":"https://example.com/x","alias":"alice-gone"}`), "Authorization", bearer(aliceRW))
	if r := tn.do(t, "DELETE", "/api/v1/links/alice-gone", "", nil, "Authorization", bearer(aliceRW)); r.status != 204 {
		t.Fatalf("alice's delete: %d %s", r.status, r.body)
	}
	u := tn.do(t, "GET", "/api/v1/links/no-such-link", "", nil, "Authorization", bearer(bob))
	for _, c := range []struct{ method, path, body string }{
		{"GET", "/api/v1/links/alice-link", ""}, {"GET", "/api/v1/links/alice-gone", ""},
		{"PATCH", "/api/v1/links/alice-gone", `{"disabled":true}`}, {"DELETE", "/api/v1/links/alice-gone", ""},
	} {
		a := tn.do(t, c.method, c.path, js, []byte(c.body), "Authorization", bearer(bob))
		if a.status != u.status || string(a.body) != string(u.body) {
			t.Fatalf("bob's %s %s: %d %s; an unknown code: %d %s", c.method, c.path, a.status, a.body, u.status, u.body)
		}
	}
	// Public stays public.
	for _, p := range []string{"/alice-link", "/alice-link+", "/alice-link/qr", "/healthz", "/readyz"} {
		if r := tn.do(t, "GET", p, "", nil, "Authorization", ""); r.status >= 400 {
			t.Errorf("public GET %s = %d", p, r.status)
		}
	}
	// The key list shows no secrets.
	r := tn.do(t, "GET", "/api/v1/keys", "", nil)
	if strings.Contains(string(r.body), aliceRW) || strings.Contains(string(r.body), `"key"`) {
		t.Fatalf("key list shows a secret: %s", r.body)
	}
}

func TestKeyInputIsChecked(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	before := tn.do(t, "GET", "/api/v1/keys", "", nil).body
	for _, body := range []string{
		`{"owner":"a","scopes":["links:read"]}`,
		`{"name":"a","scopes":["links:read"]}`,
		`{"name":"a","owner":"a"}`,
		`{"name":"a","owner":"a","scopes":[]}`,
		`{"name":"a","owner":"a","scopes":["links:delete"]}`,
		`{"name":"a","owner":"a","scopes":["links:read","links:read"]}`,
		`{"name":"a b","owner":"a","scopes":["links:read"]}`,
		`{"name":"a","owner":"` + strings.Repeat("o", 65) + `","scopes":["links:read"]}`,
		`{"name":"a","owner":"anonymous","scopes":["links:read"]}`,
		`{"name":"a","owner":"a","scopes":["links:read"],"rate_limit":0}`,
		`{"name":"a","owner":"a","scopes":["links:read"],"secret":"mine"}`,
	} {
		if r := tn.postJSON(t, "/api/v1/keys", body); r.status != 400 {
			t.Errorf("create key %s: %d %s", body, r.status, r.body)
		}
	}
	if r := tn.do(t, "DELETE", "/api/v1/keys/no-such-key", "", nil); r.status != 404 {
		t.Errorf("revoke unknown: %d", r.status)
	}
	if after := tn.do(t, "GET", "/api/v1/keys", "", nil).body; string(after) != string(before) {
		t.Fatalf("refused key requests changed the keys:\n%s\n%s", before, after)
	}
	for _, d := range []string{"", "a/b", "evil.example:80", "http://evil.example", "x..y", "user@evil.example"} {
		if r := tn.postJSON(t, "/api/v1/blocklist", fmt.Sprintf(`{"domain":%q}`, d)); r.status != 400 {
			t.Errorf("block %q: %d %s", d, r.status, r.body)
		}
	}
	if r := tn.do(t, "DELETE", "/api/v1/blocklist/not-blocked.example", "", nil); r.status != 404 {
		t.Errorf("unblock unknown: %d", r.status)
	}
}
