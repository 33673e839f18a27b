package httpapi_test

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestPreviewShowsWithoutRedirecting: GET /{code}+ is a page (not a
// redirect) naming the destination, the creation date and the QR code,
// kept out of search engines, with markup in the URL escaped; unknown and
// deleted links answer as /{code} does.
func TestPreviewShowsWithoutRedirecting(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	tn.create(t, `{"url":"https://example.com/a?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E&x=1","alias":"peek"}`)
	r := tn.do(t, "GET", "/peek+", "", nil, "Authorization", "", "Accept", "text/html")
	body := string(r.body)
	if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || r.header.Get("Location") != "" {
		t.Fatalf("preview: %d %v", r.status, r.header)
	}
	for _, want := range []string{`content="noindex, nofollow"`, "https://example.com/a?q=%22%3E%3Cscript%3Ealert(1)%3C/script%3E&amp;x=1",
		`src="/peek/qr?format=svg"`, "/peek</h1>"} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script") || r.header.Get("X-Robots-Tag") != "noindex, nofollow" || !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") {
		t.Fatalf("unsafe preview: %v\n%s", r.header, body)
	}
	if r := tn.do(t, "HEAD", "/peek+", "", nil, "Authorization", ""); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD: %d %d bytes", r.status, len(r.body))
	}
	if r := tn.do(t, "GET", "/nope-nope+", "", nil, "Authorization", "", "Accept", "text/html"); r.status != 404 {
		t.Fatalf("unknown: %d", r.status)
	}
	if r := tn.do(t, "GET", "/!!+", "", nil, "Authorization", ""); r.status != 404 {
		t.Fatalf("not a code: %d", r.status)
	}
	tn.do(t, "DELETE", "/api/v1/links/peek", "", nil)
	if r := tn.do(t, "GET", "/peek+", "", nil, "Authorization", ""); r.status != 410 || r.json(t)["type"] != "/problems/gone" {
		t.Fatalf("deleted: %d %s", r.status, r.body)
	}
}
