package httpapi_test

import (
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestTitleAndDescription: a link's title and description are stored
// through the shard, shown in the link JSON and on the preview page
// (escaped), changed or removed by a patch, and bounded; nothing is
// fetched to fill them.
func TestTitleAndDescription(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	l := tn.create(t, `{"url":"https://example.com/t","alias":"titled","title":"Release notes <b>2.0</b>","description":"What changed.\nAnd why."}`)
	if l["title"] != "Release notes <b>2.0</b>" || l["description"] != "What changed.\nAnd why." {
		t.Fatalf("created: %v", l)
	}
	if r := tn.do(t, "GET", "/api/v1/links/titled?consistent=true", "", nil); r.json(t)["title"] != "Release notes <b>2.0</b>" {
		t.Fatalf("read back: %s", r.body)
	}
	page := string(tn.do(t, "GET", "/titled+", "", nil, "Authorization", "").body)
	if !strings.Contains(page, "<h1>Release notes &lt;b&gt;2.0&lt;/b&gt;</h1>") || strings.Contains(page, "<b>2.0") {
		t.Fatalf("preview page:\n%s", page)
	}
	if r := tn.do(t, "PATCH", "/api/v1/links/titled", "application/json", []byte(`{"title":"Notes","description":null}`)); r.status != 200 ||
		r.json(t)["title"] != "Notes" || r.json(t)["description"] != "" {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/api/v1/links/titled", "", nil); r.json(t)["title"] != "Notes" || r.json(t)["description"] != "" {
		t.Fatalf("after the patch: %s", r.body)
	}
	plain := tn.create(t, `{"url":"https://example.com/p"}`)
	if plain["title"] != "" || plain["description"] != "" {
		t.Fatalf("defaults: %v", plain)
	}
	long := strings.Repeat("x", link.MaxTitle+1)
	for _, body := range []string{
		`{"url":"https://example.com/x","title":"` + long + `"}`,
		`{"url":"https://example.com/x","title":"two\nlines"}`,
		`{"url":"https://example.com/x","title":"bidi \u202e"}`,
		`{"url":"https://example.com/x","description":"` + strings.Repeat("y", link.MaxDescription+1) + `"}`,
		`{"url":"https://example.com/x","description":"bell \u0007"}`,
		`{"url":"https://example.com/x","title":7}`,
	} {
		if r := tn.postJSON(t, "/api/v1/links", body); r.status != 400 {
			t.Errorf("create %.80s: %d %s", body, r.status, r.body)
		}
	}
	for _, body := range []string{`{"title":"` + long + `"}`, `{"description":["x"]}`} {
		if r := tn.do(t, "PATCH", "/api/v1/links/titled", "application/json", []byte(body)); r.status != 400 {
			t.Errorf("patch %.80s: %d %s", body, r.status, r.body)
		}
	}
}

// TestNote: a link's note is the owner's: stored through the shard, shown
// in the link JSON, changed or removed by a patch and bounded, and never
// shown to a visitor (not on the preview, not in a redirect).
func TestNote(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	const note = "paid campaign: ends in March\nask Ana first"
	l := tn.create(t, `{"url":"https://example.com/n","alias":"noted","note":"paid campaign: ends in March\nask Ana first"}`)
	if l["note"] != note {
		t.Fatalf("created: %v", l)
	}
	if r := tn.do(t, "GET", "/api/v1/links/noted?consistent=true", "", nil); r.json(t)["note"] != note {
		t.Fatalf("read back: %s", r.body)
	}
	for _, path := range []string{"/noted+", "/noted"} {
		if r := tn.do(t, "GET", path, "", nil, "Authorization", ""); strings.Contains(string(r.body), "campaign") || strings.Contains(r.header.Get("Location"), "campaign") {
			t.Fatalf("%s shows the note to a visitor: %d %s", path, r.status, r.body)
		}
	}
	if r := tn.do(t, "GET", "/noted", "", nil, "Authorization", ""); r.status != 302 || r.header.Get("Location") != "https://example.com/n" {
		t.Fatalf("redirect of a noted link: %d %q", r.status, r.header.Get("Location"))
	}
	for _, body := range []string{
		`{"note":"` + strings.Repeat("z", link.MaxNote+1) + `"}`,
		`{"note":"bell \u0007"}`,
		`{"note":42}`,
		`{"notes":"typo"}`,
	} {
		r := tn.do(t, "PATCH", "/api/v1/links/noted", "application/json", []byte(body))
		if r.status != 400 || !strings.Contains(string(r.body), `"field":"note`) {
			t.Errorf("patch %.80s: %d %s", body, r.status, r.body)
		}
	}
	if r := tn.do(t, "GET", "/api/v1/links/noted?consistent=true", "", nil); r.json(t)["note"] != note {
		t.Fatalf("after refused patches: %s", r.body)
	}
	if r := tn.postJSON(t, "/api/v1/links", `{"url":"https://example.com/x","note":"`+strings.Repeat("z", link.MaxNote+1)+`"}`); r.status != 400 {
		t.Errorf("create with a long note: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "PATCH", "/api/v1/links/noted", "application/json", []byte(`{"note":"done"}`)); r.status != 200 || r.json(t)["note"] != "done" {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "PATCH", "/api/v1/links/noted", "application/json", []byte(`{"note":null}`)); r.status != 200 || r.json(t)["note"] != "" {
		t.Fatalf("removing it: %d %s", r.status, r.body)
	}
}
