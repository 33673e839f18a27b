package httpapi_test

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestLimitedVisitsKeepTheirDestination: a link with max_visits shows
// its destination only to a visit. HEAD, a bot (a link unfurler) and the
// public preview get a page without it and use no visit up; the one
// browser visit gets the redirect; then the link is gone (issue 26: HEAD,
// any bot-looking User-Agent and the preview showed it for free).
func TestLimitedVisitsKeepTheirDestination(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	const secret = "https://example.com/one-time-secret-token"
	tn.create(t, `{"url":"`+secret+`","alias":"once","max_visits":1,"title":"a one-time link"}`)
	browser := "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"
	for _, c := range []struct{ method, path, ua string }{
		{"HEAD", "/once", browser},
		{"GET", "/once", "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"},
		{"GET", "/once", "facebookexternalhit/1.1"},
		{"GET", "/once+", browser},
		{"HEAD", "/once+", browser},
	} {
		r := tn.do(t, c.method, c.path, "", nil, "Authorization", "", "User-Agent", c.ua)
		if r.status != 200 || r.header.Get("Location") != "" || strings.Contains(string(r.body), "one-time-secret") {
			t.Fatalf("%s %s as %q: %d %v %s", c.method, c.path, c.ua, r.status, r.header, r.body)
		}
	}
	if r := tn.do(t, "GET", "/once", "", nil, "Authorization", "", "User-Agent", browser); r.status != 302 || r.header.Get("Location") != secret {
		t.Fatalf("the visit: %d %v", r.status, r.header)
	}
	if r := tn.do(t, "GET", "/once", "", nil, "Authorization", "", "User-Agent", browser); r.status != 410 {
		t.Fatalf("after its one visit: %d", r.status)
	}
}

// TestScopesKeepTheirSecrets: a key that may write links but not read
// them gets back only what it wrote (an update answers the fields it set,
// a bulk update no records); click counts, and the order by them, need
// stats:read.
func TestScopesKeepTheirSecrets(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	_, writer := tn.makeKey(t, "writer", "erin", "links:write")
	_, reader := tn.makeKey(t, "reader", "erin", "links:read")
	_, stats := tn.makeKey(t, "stats", "erin", "links:read", "stats:read")
	r := tn.do(t, "POST", "/api/v1/links", "application/json", []byte(`{"url":"https://example.com/private-path","alias":"erins","tags":["t"],"note":"do not tell"}`),
		"Authorization", bearer(writer))
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	r = tn.do(t, "PATCH", "/api/v1/links/erins", "application/json", []byte(`{"title":"new title"}`), "Authorization", bearer(writer))
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	got := r.json(t)
	if got["title"] != "new title" || got["code"] != "erins" || got["url"] != nil || got["note"] != nil || got["tags"] != nil {
		t.Fatalf("a write-only key's update read back %v", got)
	}
	r = tn.do(t, "POST", "/api/v1/links/bulk-update", "application/json", []byte(`{"codes":["erins"],"patch":{"disabled":false}}`), "Authorization", bearer(writer))
	if r.status != 200 || strings.Contains(string(r.body), "private-path") {
		t.Fatalf("a write-only key's bulk update: %d %s", r.status, r.body)
	}
	for _, path := range []string{"/api/v1/links/erins", "/api/v1/links"} {
		if r := tn.do(t, "GET", path, "", nil, "Authorization", bearer(reader)); r.status != 200 || strings.Contains(string(r.body), `"clicks"`) {
			t.Fatalf("GET %s with links:read only: %d %s", path, r.status, r.body)
		}
		if r := tn.do(t, "GET", path, "", nil, "Authorization", bearer(stats)); r.status != 200 || !strings.Contains(string(r.body), `"clicks"`) {
			t.Fatalf("GET %s with stats:read: %d %s", path, r.status, r.body)
		}
	}
	if r := tn.do(t, "GET", "/api/v1/links?sort=-clicks", "", nil, "Authorization", bearer(reader)); r.status != 403 {
		t.Fatalf("sort by clicks without stats:read: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/api/v1/links?sort=-clicks", "", nil, "Authorization", bearer(stats)); r.status != 200 {
		t.Fatalf("sort by clicks with stats:read: %d %s", r.status, r.body)
	}
}
