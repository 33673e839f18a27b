package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/link"
)

// TestBadInputIsRejectedAndChangesNothing sends every kind of bad request and
// checks the status, that the answer is a problem document of the right
// type, and that nothing stored changed.
func TestBadInputIsRejectedAndChangesNothing(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{Blocklist: map[string]struct{}{"evil.example": {}}}, nil)
	tn.create(t, `{"url":"https://example.com/keep","alias":"keep-me","tags":["a"]}`)
	tn.create(t, `{"url":"https://example.com/dead","alias":"tomb-stone"}`)
	tn.do(t, "DELETE", "/api/v1/links/tomb-stone", "", nil)
	before := tn.storedState(t)

	const js = "application/json"
	past := "2001-01-01T00:00:00Z"
	huge := `{"url":"https://example.com/` + strings.Repeat("a", 70<<10) + `"}`
	longURL := `{"url":"https://example.com/` + strings.Repeat("a", link.DefaultMaxURLLength) + `"}`
	tooManyLinks := `{"links":[` + strings.TrimSuffix(strings.Repeat(`{"url":"https://example.com"},`, httpapi.MaxBulkLinks+1), ",") + `]}`
	hugeBulk := `{"links":[` + strings.TrimSuffix(strings.Repeat(`{"url":"https://example.com/`+strings.Repeat("b", 8000)+`"},`, 1100), ",") + `]}`
	manyTags := `{"url":"https://example.com","tags":[` + strings.TrimSuffix(strings.Repeat(`"t",`, 33), ",") + `]}`

	cases := []struct {
		name        string
		method      string
		path        string
		contentType string
		body        string
		status      int
		kind        string
	}{
		{"malformed JSON", "POST", "/api/v1/links", js, `{"url":`, 400, "malformed-json"},
		{"not JSON", "POST", "/api/v1/links", js, `hello`, 400, "malformed-json"},
		{"empty body", "POST", "/api/v1/links", js, ``, 400, "malformed-json"},
		{"JSON array", "POST", "/api/v1/links", js, `["https://example.com"]`, 400, "invalid-input"},
		{"trailing data", "POST", "/api/v1/links", js, `{"url":"https://example.com"} {"url":"https://x.example"}`, 400, "malformed-json"},
		{"unknown field", "POST", "/api/v1/links", js, `{"url":"https://example.com","owner":"me"}`, 400, "unknown-field"},
		{"wrong type", "POST", "/api/v1/links", js, `{"url":42}`, 400, "invalid-input"},
		{"body over 64 KiB", "POST", "/api/v1/links", js, huge, 413, "body-too-large"},
		{"form content type", "POST", "/api/v1/links", "application/x-www-form-urlencoded", `url=https://example.com`, 415, "unsupported-media-type"},
		{"missing url", "POST", "/api/v1/links", js, `{"alias":"no-url"}`, 400, "invalid-url"},
		{"javascript URL", "POST", "/api/v1/links", js, `{"url":"javascript:alert(document.cookie)"}`, 400, "invalid-url"},
		{"data URL", "POST", "/api/v1/links", js, `{"url":"data:text/html,<script>x</script>"}`, 400, "invalid-url"},
		{"ftp URL", "POST", "/api/v1/links", js, `{"url":"ftp://example.com/file"}`, 400, "invalid-url"},
		{"CRLF in URL", "POST", "/api/v1/links", js, `{"url":"https://example.com/\r\nSet-Cookie: a=b"}`, 400, "invalid-url"},
		{"space in URL", "POST", "/api/v1/links", js, `{"url":"https://example.com/a b"}`, 400, "invalid-url"},
		{"userinfo", "POST", "/api/v1/links", js, `{"url":"https://bank.com@evil.example/login"}`, 400, "invalid-url"},
		{"no host", "POST", "/api/v1/links", js, `{"url":"https:///path"}`, 400, "invalid-url"},
		{"relative URL", "POST", "/api/v1/links", js, `{"url":"/just/a/path"}`, 400, "invalid-url"},
		{"own host", "POST", "/api/v1/links", js, `{"url":"http://sho.rt/keep-me"}`, 400, "invalid-url"},
		{"blocklisted domain", "POST", "/api/v1/links", js, `{"url":"https://evil.example/"}`, 400, "invalid-url"},
		{"blocklisted subdomain", "POST", "/api/v1/links", js, `{"url":"https://login.evil.example/"}`, 400, "invalid-url"},
		{"URL too long", "POST", "/api/v1/links", js, longURL, 400, "invalid-url"},
		{"reserved alias", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":"api"}`, 400, "invalid-alias"},
		{"reserved alias other case", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":"Metrics"}`, 400, "invalid-alias"},
		{"alias too short", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":"ab"}`, 400, "invalid-alias"},
		{"alias bad characters", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":"a/b.c"}`, 400, "invalid-alias"},
		{"alias non-ASCII", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":"héllo"}`, 400, "invalid-alias"},
		{"duplicate alias", "POST", "/api/v1/links", js, `{"url":"https://example.com/other","alias":"keep-me"}`, 409, "alias-taken"},
		{"alias of a tombstone", "POST", "/api/v1/links", js, `{"url":"https://example.com/other","alias":"tomb-stone"}`, 409, "alias-taken"},
		{"expiry in the past", "POST", "/api/v1/links", js, `{"url":"https://example.com","expires_at":"` + past + `"}`, 400, "invalid-input"},
		{"expiry not RFC 3339", "POST", "/api/v1/links", js, `{"url":"https://example.com","expires_at":"tomorrow"}`, 400, "invalid-input"},
		{"expiry and ttl", "POST", "/api/v1/links", js, `{"url":"https://example.com","expires_at":"2099-01-01T00:00:00Z","ttl":60}`, 400, "invalid-input"},
		{"ttl zero", "POST", "/api/v1/links", js, `{"url":"https://example.com","ttl":0}`, 400, "invalid-input"},
		{"ttl negative", "POST", "/api/v1/links", js, `{"url":"https://example.com","ttl":-5}`, 400, "invalid-input"},
		{"ttl overflowing", "POST", "/api/v1/links", js, `{"url":"https://example.com","ttl":9223372036854775807}`, 400, "invalid-input"},
		{"redirect 303", "POST", "/api/v1/links", js, `{"url":"https://example.com","redirect":303}`, 400, "invalid-input"},
		{"too many tags", "POST", "/api/v1/links", js, manyTags, 400, "invalid-input"},
		{"max_visits zero", "POST", "/api/v1/links", js, `{"url":"https://example.com","max_visits":0}`, 400, "invalid-input"},
		{"max_visits too large", "POST", "/api/v1/links", js, `{"url":"https://example.com","max_visits":1000001}`, 400, "invalid-input"},
		{"max_visits negative", "POST", "/api/v1/links", js, `{"url":"https://example.com","max_visits":-1}`, 400, "invalid-input"},
		{"empty alias", "POST", "/api/v1/links", js, `{"url":"https://example.com","alias":""}`, 400, "invalid-alias"},
		{"own host as loopback IP", "POST", "/api/v1/links", js, `{"url":"http://127.0.0.1:8080/keep-me"}`, 400, "invalid-url"},
		{"cloud metadata address", "POST", "/api/v1/links", js, `{"url":"http://169.254.169.254/latest/meta-data/"}`, 400, "invalid-url"},
		{"private network address", "POST", "/api/v1/links", js, `{"url":"http://10.0.0.5/admin"}`, 400, "invalid-url"},
		{"www variant of the own host", "POST", "/api/v1/links", js, `{"url":"https://www.sho.rt/keep-me"}`, 400, "invalid-url"},
		{"no content type", "POST", "/api/v1/links", "", `{"url":"https://example.com"}`, 415, "unsupported-media-type"},
		{"patch as a form", "PATCH", "/api/v1/links/keep-me", "application/x-www-form-urlencoded", `url=https://x.example`, 415, "unsupported-media-type"},

		{"PUT on collection", "PUT", "/api/v1/links", js, `{}`, 405, "method-not-allowed"},
		{"DELETE on collection", "DELETE", "/api/v1/links", "", ``, 405, "method-not-allowed"},
		{"JSON POST on a code", "POST", "/keep-me", js, `{"password":"x"}`, 415, "unsupported-media-type"},
		{"PUT on a code", "PUT", "/keep-me", js, `{}`, 405, "method-not-allowed"},
		{"PUT on a link", "PUT", "/api/v1/links/keep-me", js, `{"url":"https://x.example"}`, 405, "method-not-allowed"},
		{"POST on healthz", "POST", "/healthz", "", ``, 405, "method-not-allowed"},
		{"POST on the digest", "POST", "/admin/v1/digest", js, `{}`, 405, "method-not-allowed"},
		{"DELETE on the leases", "DELETE", "/admin/v1/leases", "", ``, 405, "method-not-allowed"},

		{"patch unknown field", "PATCH", "/api/v1/links/keep-me", js, `{"alias":"new-name"}`, 400, "unknown-field"},
		{"patch javascript URL", "PATCH", "/api/v1/links/keep-me", js, `{"url":"javascript:alert(1)"}`, 400, "invalid-url"},
		{"patch url null", "PATCH", "/api/v1/links/keep-me", js, `{"url":null}`, 400, "invalid-url"},
		{"patch expiry in the past", "PATCH", "/api/v1/links/keep-me", js, `{"expires_at":"` + past + `"}`, 400, "invalid-input"},
		{"patch redirect null", "PATCH", "/api/v1/links/keep-me", js, `{"redirect":null}`, 400, "invalid-input"},
		{"patch redirect 200", "PATCH", "/api/v1/links/keep-me", js, `{"redirect":200}`, 400, "invalid-input"},
		{"patch disabled string", "PATCH", "/api/v1/links/keep-me", js, `{"disabled":"yes"}`, 400, "invalid-input"},
		{"patch tags not strings", "PATCH", "/api/v1/links/keep-me", js, `{"tags":[1,2]}`, 400, "invalid-input"},
		{"patch valid field plus bad one", "PATCH", "/api/v1/links/keep-me", js, `{"url":"https://example.com/new","redirect":999}`, 400, "invalid-input"},
		{"patch not an object", "PATCH", "/api/v1/links/keep-me", js, `null`, 400, "malformed-json"},
		{"patch malformed", "PATCH", "/api/v1/links/keep-me", js, `{"url":"https://x`, 400, "malformed-json"},
		{"patch too large", "PATCH", "/api/v1/links/keep-me", js, huge, 413, "body-too-large"},
		{"patch unknown code", "PATCH", "/api/v1/links/nobody-here", js, `{"disabled":true}`, 404, "not-found"},
		{"patch tombstone", "PATCH", "/api/v1/links/tomb-stone", js, `{"disabled":true}`, 410, "gone"},
		{"delete unknown code", "DELETE", "/api/v1/links/nobody-here", "", ``, 404, "not-found"},
		{"delete tombstone", "DELETE", "/api/v1/links/tomb-stone", "", ``, 410, "gone"},
		{"get code with bad characters", "GET", "/api/v1/links/a.b", "", ``, 404, "not-found"},
		{"get code too long", "GET", "/api/v1/links/" + strings.Repeat("x", 65), "", ``, 404, "not-found"},
		{"consistent not a bool", "GET", "/api/v1/links/keep-me?consistent=maybe", "", ``, 400, "invalid-input"},
		{"unknown API path", "GET", "/api/v2/links", "", ``, 404, "not-found"},
		{"bulk: malformed JSON", "POST", "/api/v1/links/bulk", js, `{"links":[{"url":`, 400, "malformed-json"},
		{"bulk: no links field", "POST", "/api/v1/links/bulk", js, `{}`, 400, "invalid-input"},
		{"bulk: empty list", "POST", "/api/v1/links/bulk", js, `{"links":[]}`, 400, "invalid-input"},
		{"bulk: a bare array", "POST", "/api/v1/links/bulk", js, `[{"url":"https://example.com"}]`, 400, "invalid-input"},
		{"bulk: over the link limit", "POST", "/api/v1/links/bulk", js, tooManyLinks, 400, "invalid-input"},
		{"bulk: unknown field in a link", "POST", "/api/v1/links/bulk", js, `{"links":[{"url":"https://example.com/ok"},{"url":"https://example.com","owner":"me"}]}`, 400, "unknown-field"},
		{"bulk: body over the bulk limit", "POST", "/api/v1/links/bulk", js, hugeBulk, 413, "body-too-large"},
		{"bulk: form content type", "POST", "/api/v1/links/bulk", "text/plain", `{"links":[{"url":"https://example.com"}]}`, 415, "unsupported-media-type"},
		{"bulk: wrong method", "PUT", "/api/v1/links/bulk", js, `{"links":[{"url":"https://example.com"}]}`, 405, "method-not-allowed"},
		{"bulk-delete: GET", "GET", "/api/v1/links/bulk-delete", "", ``, 405, "method-not-allowed"},
		{"bulk-delete: DELETE", "DELETE", "/api/v1/links/bulk-delete", "", ``, 405, "method-not-allowed"},
		{"bulk-update: PATCH", "PATCH", "/api/v1/links/bulk-update", js, `{"disabled":true}`, 405, "method-not-allowed"},
		{"import: GET", "GET", "/api/v1/links/import", "", ``, 405, "method-not-allowed"},
		{"export: DELETE", "DELETE", "/api/v1/links/export", "", ``, 405, "method-not-allowed"},
		{"preview: POST", "POST", "/keep-me+", "application/x-www-form-urlencoded", `password=x`, 405, "method-not-allowed"},
		{"list: bad escape in the query", "GET", "/api/v1/links?cursor=%zz", "", ``, 400, "invalid-input"},
		{"list: semicolon in the query", "GET", "/api/v1/links?limit=1;tag=x", "", ``, 400, "invalid-input"},
		{"admin: bad escape in the query", "GET", "/admin/v1/links?x=%", "", ``, 400, "invalid-input"},
		{"tags: semicolon in the query", "GET", "/api/v1/tags?limit=5;x", "", ``, 400, "invalid-input"},
		{"preview: a semicolon is read as browsers send it", "GET", "/nobody-here+?a;b", "", ``, 404, "not-found"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body []byte
			if c.body != "" || c.method == "POST" || c.method == "PATCH" {
				body = []byte(c.body)
			}
			do := tn.do
			if strings.HasPrefix(c.path, "/admin/") {
				do = tn.adminDo // the admin routes live on the admin listener
			}
			r := do(t, c.method, c.path, c.contentType, body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("Content-Type %q", ct)
			}
			p := r.json(t)
			if p["type"] != "/problems/"+c.kind || p["status"] != float64(c.status) || p["title"] == "" {
				t.Fatalf("problem %s, want type %s", r.body, c.kind)
			}
			if c.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
		})
	}
	if after := tn.storedState(t); after != before {
		t.Fatalf("rejected requests changed stored state:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// The surviving link still redirects as before.
	r := tn.do(t, "GET", "/keep-me", "", nil)
	if r.status != 302 || r.header.Get("Location") != "https://example.com/keep" {
		t.Fatalf("keep-me = %d %s", r.status, r.header.Get("Location"))
	}
}
