package httpapi_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/httpapi"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

func TestLinkLifecycle(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	created := tn.create(t, `{"url":"https://example.com/landing?utm=1","tags":["promo"]}`)
	code := created["code"].(string)
	if len(code) != 7 {
		t.Fatalf("generated code %q is not 7 characters", code)
	}
	if created["short_url"] != "http://sho.rt/"+code || created["url"] != "https://example.com/landing?utm=1" ||
		created["redirect"] != float64(302) || created["expires_at"] != nil || created["disabled"] != false ||
		created["clicks"] != float64(0) || created["max_visits"] != nil {
		t.Fatalf("created link = %v", created)
	}
	for _, k := range []string{"created_at", "updated_at"} {
		if _, err := time.Parse(time.RFC3339, created[k].(string)); err != nil || !strings.HasSuffix(created[k].(string), "Z") {
			t.Fatalf("%s = %v is not RFC 3339 UTC", k, created[k])
		}
	}

	// Redirect: GET and HEAD alike, Location exactly the stored URL.
	for _, m := range []string{"GET", "HEAD"} {
		r := tn.do(t, m, "/"+code, "", nil)
		if r.status != 302 || r.header.Get("Location") != "https://example.com/landing?utm=1" ||
			r.header.Get("Cache-Control") != "private, max-age=90" {
			t.Fatalf("%s /%s = %d %v", m, code, r.status, r.header)
		}
	}
	r := tn.do(t, "GET", "/api/v1/links/"+code, "", nil)
	if r.status != 200 || r.json(t)["url"] != "https://example.com/landing?utm=1" {
		t.Fatalf("GET link = %d %s", r.status, r.body)
	}
	r = tn.do(t, "GET", "/api/v1/links/"+code+"?consistent=true", "", nil)
	if r.status != 200 || r.json(t)["code"] != code {
		t.Fatalf("consistent GET = %d %s", r.status, r.body)
	}

	// PATCH: new URL and a permanent redirect.
	r = tn.do(t, "PATCH", "/api/v1/links/"+code, "application/merge-patch+json", []byte(`{"url":"https://example.org/new","redirect":308}`))
	if r.status != 200 || r.json(t)["url"] != "https://example.org/new" || r.json(t)["tags"].([]any)[0] != "promo" {
		t.Fatalf("PATCH = %d %s", r.status, r.body)
	}
	r = tn.do(t, "GET", "/"+code, "", nil)
	if r.status != 308 || r.header.Get("Location") != "https://example.org/new" || r.header.Get("Cache-Control") != "" {
		t.Fatalf("after PATCH redirect = %d %v", r.status, r.header)
	}
	// Disabled → 410; enabled again → redirects.
	if r = tn.do(t, "PATCH", "/api/v1/links/"+code, "application/json", []byte(`{"disabled":true}`)); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	if r = tn.do(t, "GET", "/"+code, "", nil); r.status != 410 {
		t.Fatalf("disabled link redirect = %d", r.status)
	}
	if r = tn.do(t, "GET", "/api/v1/links/"+code, "", nil); r.status != 200 || r.json(t)["disabled"] != true {
		t.Fatalf("disabled link is still readable: %d %s", r.status, r.body)
	}
	tn.do(t, "PATCH", "/api/v1/links/"+code, "application/json", []byte(`{"disabled":false}`))
	if r = tn.do(t, "GET", "/"+code, "", nil); r.status != 308 {
		t.Fatalf("re-enabled redirect = %d", r.status)
	}
	// Expiry set then removed; tags cleared with null.
	exp := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	r = tn.do(t, "PATCH", "/api/v1/links/"+code, "application/json", []byte(`{"expires_at":"`+exp+`","tags":null}`))
	if r.status != 200 || r.json(t)["expires_at"] != exp || len(r.json(t)["tags"].([]any)) != 0 {
		t.Fatalf("set expiry: %d %s", r.status, r.body)
	}
	r = tn.do(t, "PATCH", "/api/v1/links/"+code, "application/json", []byte(`{"expires_at":null}`))
	if r.status != 200 || r.json(t)["expires_at"] != nil {
		t.Fatalf("clear expiry: %d %s", r.status, r.body)
	}
	// An empty merge patch changes nothing.
	before := tn.storedState(t)
	if r = tn.do(t, "PATCH", "/api/v1/links/"+code, "application/json", []byte(`{}`)); r.status != 200 {
		t.Fatalf("empty patch: %d", r.status)
	}
	if tn.storedState(t) != before {
		t.Fatal("empty patch wrote")
	}

	// DELETE → 204; then 410 on redirect, on the API, on a second delete
	// and on a patch, and the code can never be taken again.
	if r = tn.do(t, "DELETE", "/api/v1/links/"+code, "", nil); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("DELETE = %d %s", r.status, r.body)
	}
	if r = tn.do(t, "GET", "/"+code, "", nil); r.status != 410 {
		t.Fatalf("deleted redirect = %d", r.status)
	}
	for _, c := range []struct{ method, ctype, body string }{
		{"GET", "", ""}, {"DELETE", "", ""}, {"PATCH", "application/json", `{"disabled":false}`}, {"PATCH", "application/json", `{}`},
	} {
		r = tn.do(t, c.method, "/api/v1/links/"+code, c.ctype, []byte(c.body))
		if r.status != 410 || r.json(t)["type"] != "/problems/gone" || r.json(t)["detail"] != "the link was deleted" {
			t.Fatalf("%s %s of the deleted link = %d %s", c.method, c.body, r.status, r.body)
		}
	}
	r = tn.postJSON(t, "/api/v1/links", `{"url":"https://x.example","alias":"`+code+`"}`)
	if r.status != 409 || r.json(t)["type"] != "/problems/alias-taken" {
		t.Fatalf("re-using a deleted code: %d %s", r.status, r.body)
	}
}

func TestAliasExpiryAndRedirectCodes(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	l := tn.create(t, `{"url":"https://example.com","alias":"My_Link-1","redirect":301}`)
	if l["code"] != "My_Link-1" {
		t.Fatalf("alias create = %v", l)
	}
	r := tn.do(t, "GET", "/My_Link-1", "", nil)
	if r.status != 301 || r.header.Get("Location") != "https://example.com" {
		t.Fatalf("301 link = %d %v", r.status, r.header)
	}
	// Aliases are case-sensitive.
	if r = tn.do(t, "GET", "/my_link-1", "", nil); r.status != 404 {
		t.Fatalf("other case = %d", r.status)
	}
	tn.create(t, `{"url":"https://example.com/tmp","alias":"temporary","redirect":307}`)
	if r = tn.do(t, "GET", "/temporary", "", nil); r.status != 307 || r.header.Get("Cache-Control") != "private, max-age=90" {
		t.Fatalf("307 link = %d %v", r.status, r.header)
	}

	// An expiry one second out: redirects now, 410 once it has passed.
	// Expiry is checked at read time, with the node's clock; poll for it.
	exp := tn.create(t, `{"url":"https://example.com/soon","alias":"soon","ttl":1}`)
	if exp["expires_at"] == nil {
		t.Fatal("ttl did not set expires_at")
	}
	testkit.WaitFor(t, 10*time.Second, "the expired link to answer 410", func() bool {
		r = tn.do(t, "GET", "/soon", "", nil)
		if r.status != 410 && r.status != 302 {
			t.Fatalf("expiring link = %d", r.status)
		}
		return r.status == 410
	})
	expAt, _ := time.Parse(time.RFC3339Nano, exp["expires_at"].(string))
	if time.Now().Before(expAt) {
		t.Fatal("410 before the expiry")
	}
}

// TestVisitorPagesSayWhatHappened: a browser that follows a short link
// that leads nowhere is told which of the cases it met: no such link,
// removed, turned off, expired, used up or taken down (issue 27: one text
// covered four of them); an API client gets the problem, its detail as
// specific; HEAD gets the status alone.
func TestVisitorPagesSayWhatHappened(t *testing.T) {
	t.Parallel()
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	tn := startFake(t, link.URLPolicy{}, func(c *httpapi.Config) { c.Now = func() time.Time { return time.Unix(0, clock.Load()) } })
	html := "text/html,application/xhtml+xml"
	browser := "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"
	tn.create(t, `{"url":"https://example.com/r","alias":"removed"}`)
	tn.do(t, "DELETE", "/api/v1/links/removed", "", nil)
	tn.create(t, `{"url":"https://example.com/o","alias":"turned-off"}`)
	if r := tn.do(t, "PATCH", "/api/v1/links/turned-off", "application/json", []byte(`{"disabled":true}`)); r.status != 200 {
		t.Fatalf("disable: %d %s", r.status, r.body)
	}
	ends := time.Unix(0, clock.Load()).Add(time.Hour).UTC().Format(time.RFC3339)
	tn.create(t, `{"url":"https://example.com/e","alias":"ended","expires_at":"`+ends+`"}`)
	tn.create(t, `{"url":"https://example.com/u","alias":"used-up","max_visits":1}`)
	if r := tn.do(t, "GET", "/used-up", "", nil, "User-Agent", browser); r.status != 302 {
		t.Fatalf("the one visit: %d", r.status)
	}
	clock.Add(int64(2 * time.Hour))
	for _, c := range []struct {
		code, title, detail string
		status              int
	}{
		{"nope123", "No such link", "no link has this code", 404},
		{"removed", "Link removed", "deleted", 410},
		{"turned-off", "Link turned off", "turned off by its owner", 410},
		{"ended", "Link expired", "expired", 410},
		{"used-up", "Link used up", "visits are used up", 410},
	} {
		r := tn.do(t, "GET", "/"+c.code, "", nil, "Accept", html, "User-Agent", browser)
		if r.status != c.status || !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(string(r.body), "<h1>"+c.title+"</h1>") {
			t.Errorf("/%s in a browser = %d %s", c.code, r.status, r.body)
		}
		r = tn.do(t, "GET", "/"+c.code, "", nil, "Accept", "application/json", "User-Agent", browser)
		if r.status != c.status || r.header.Get("Content-Type") != "application/problem+json" || !strings.Contains(r.json(t)["detail"].(string), c.detail) {
			t.Errorf("/%s for an API client = %d %s", c.code, r.status, r.body)
		}
		if r := tn.do(t, "HEAD", "/"+c.code, "", nil); r.status != c.status || len(r.body) != 0 {
			t.Errorf("HEAD /%s = %d %q", c.code, r.status, r.body)
		}
	}
}

func TestOperatorEndpoints(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	tn.create(t, `{"url":"https://example.com","alias":"metric-me"}`)
	tn.do(t, "GET", "/metric-me", "", nil)
	tn.do(t, "GET", "/metric-me", "", nil)
	if r := tn.do(t, "GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz = %d", r.status)
	}
	if r := tn.do(t, "GET", "/readyz", "", nil); r.status != 200 || r.json(t)["status"] != "ready" {
		t.Fatalf("readyz = %d %s", r.status, r.body)
	}
	// The operator's routes live on the admin listener only.
	for _, path := range []string{"/metrics", "/admin/v1/cluster", "/admin/v1/digest", "/admin/v1/leases", "/admin/v1/links", "/debug/pprof/"} {
		if r := tn.do(t, "GET", path, "", nil); r.status != 404 {
			t.Errorf("public GET %s = %d, want 404", path, r.status)
		}
	}
	if r := tn.do(t, "DELETE", "/admin/v1/nodes/nobody", "", nil); r.status != 404 || r.json(t)["type"] != "/problems/not-found" {
		t.Fatalf("public remove node = %d %s", r.status, r.body)
	}
	if r := tn.do(t, "POST", "/admin/v1/nodes/nobody/drain", "", nil); r.status != 404 || r.json(t)["type"] != "/problems/not-found" {
		t.Fatalf("public drain = %d %s", r.status, r.body)
	}
	if r := tn.adminDo(t, "PUT", "/admin/v1/nodes/n1/drain", `{"x":1}`, nil); r.status != 405 {
		t.Fatalf("PUT drain = %d %s", r.status, r.body)
	}
	r := tn.adminDo(t, "GET", "/metrics", "", nil, "Authorization", "")
	body := string(r.body)
	for _, want := range []string{
		`linkraft_redirect_duration_seconds_count{status="302"} 2`,
		`linkraft_cache_hits_total{shard=`,
		`linkraft_apply_duration_seconds_bucket{shard=`,
		`linkraft_http_request_duration_seconds_count{method="POST",route="/api/v1/links",status="201"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if r := tn.adminDo(t, "DELETE", "/admin/v1/nodes/nobody", "", nil); r.status != 404 || r.json(t)["type"] != "/problems/unknown-node" {
		t.Fatalf("remove unknown node = %d %s", r.status, r.body)
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		if r := tn.adminDo(t, m, "/admin/v1/nodes/n1%0d%0aSet-Cookie:x/drain", "", nil); r.status != 404 || r.json(t)["type"] != "/problems/unknown-node" {
			t.Fatalf("%s drain of a hostile ID = %d %s", m, r.status, r.body)
		}
	}
	r = tn.adminDo(t, "GET", "/admin/v1/cluster", "", nil)
	st := r.json(t)
	nodes := st["nodes"].([]any)
	shards := st["shards"].([]any)
	if r.status != 200 || st["node_id"] == "" || len(nodes) != 1 || len(shards) != 4 {
		t.Fatalf("cluster = %d %s", r.status, r.body)
	}
	for _, s := range shards {
		sh := s.(map[string]any)
		if sh["leader"] != st["node_id"] || len(sh["replicas"].([]any)) != 1 {
			t.Fatalf("shard status %v", sh)
		}
	}
	// The digest of every local group: the meta group and the 4 shards,
	// one of which holds the link made above.
	r = tn.adminDo(t, "GET", "/admin/v1/digest", "", nil)
	var dg struct {
		Groups []struct {
			Group        string `json:"group"`
			AppliedIndex uint64 `json:"applied_index"`
			Items        int    `json:"items"`
			Digest       string `json:"digest"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(r.body, &dg); err != nil || r.status != 200 || len(dg.Groups) != 5 || dg.Groups[0].Group != "meta" {
		t.Fatalf("digest = %d %s (%v)", r.status, r.body, err)
	}
	links := 0
	for _, g := range dg.Groups {
		if len(g.Digest) != 64 || g.AppliedIndex == 0 {
			t.Fatalf("group digest %+v", g)
		}
		if g.Group != "meta" {
			links += g.Items
		}
	}
	if links != 1 {
		t.Fatalf("digests count %d links, want 1: %s", links, r.body)
	}
}

// TestBulkCreate: a bulk create answers each link as a single create would
// — made (201), bad URL (400), alias taken before or earlier in the same
// request (409) — in request order, and what it made redirects.
func TestBulkCreate(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	tn.create(t, `{"url":"https://example.com/old","alias":"old-alias"}`)
	var items []string
	want := map[int]int{}
	for i := 0; i < 300; i++ {
		switch {
		case i == 7:
			items = append(items, `{"url":"javascript:alert(1)"}`)
			want[i] = 400
		case i == 8:
			items = append(items, `{"url":"https://example.com/x","alias":"old-alias"}`)
			want[i] = 409
		case i == 9 || i == 10:
			items = append(items, fmt.Sprintf(`{"url":"https://example.com/twice/%d","alias":"bulk-twice"}`, i))
			want[i] = 201 + (i-9)*(409-201) // the first wins
		case i%50 == 0:
			items = append(items, fmt.Sprintf(`{"url":"https://example.com/a/%d","alias":"bulk-%d","tags":["t"],"ttl":3600,"redirect":301}`, i, i))
			want[i] = 201
		default:
			items = append(items, fmt.Sprintf(`{"url":"https://example.com/g/%d"}`, i))
			want[i] = 201
		}
	}
	r := tn.postJSON(t, "/api/v1/links/bulk", `{"links":[`+strings.Join(items, ",")+`]}`)
	if r.status != 200 {
		t.Fatalf("bulk = %d %s", r.status, r.body)
	}
	var out struct {
		Created, Failed int
		Results         []struct {
			Status int
			Link   *struct {
				Code, URL string
				Redirect  int
				Tags      []string
				ExpiresAt *time.Time `json:"expires_at"`
			}
			Problem *struct{ Type string }
		}
	}
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	if out.Created != 297 || out.Failed != 3 || len(out.Results) != 300 {
		t.Fatalf("created %d failed %d results %d", out.Created, out.Failed, len(out.Results))
	}
	codes := map[string]bool{}
	for i, res := range out.Results {
		if res.Status != want[i] {
			t.Fatalf("link %d: status %d, want %d", i, res.Status, want[i])
		}
		if res.Status != 201 {
			if res.Problem == nil || res.Link != nil {
				t.Fatalf("link %d: failure without a problem: %+v", i, res)
			}
			continue
		}
		l := res.Link
		if codes[l.Code] {
			t.Fatalf("code %s given twice", l.Code)
		}
		codes[l.Code] = true
		if i%50 == 0 && (l.Code != fmt.Sprintf("bulk-%d", i) || l.Redirect != 301 || len(l.Tags) != 1 || l.ExpiresAt == nil) {
			t.Fatalf("link %d = %+v", i, l)
		}
		g := tn.do(t, "GET", "/"+l.Code, "", nil)
		if g.status != l.Redirect || g.header.Get("Location") != l.URL {
			t.Fatalf("redirect of %s = %d %s, want %d %s", l.Code, g.status, g.header.Get("Location"), l.Redirect, l.URL)
		}
	}
	if p := out.Results[8].Problem; p.Type != "/problems/alias-taken" {
		t.Fatalf("taken alias problem %+v", p)
	}
	if p := out.Results[7].Problem; p.Type != "/problems/invalid-url" {
		t.Fatalf("bad URL problem %+v", p)
	}
	if got := tn.do(t, "GET", "/old-alias", "", nil); got.header.Get("Location") != "https://example.com/old" {
		t.Fatalf("the taken alias changed: %s", got.header.Get("Location"))
	}
	stored := strings.Count(tn.storedState(t), "\n")
	if stored != 298 {
		t.Fatalf("%d links stored, want 298", stored)
	}
}

// TestReadyzHoldsUnderWrites: a node that keeps up with its writes stays
// ready while they go on. Every write opens a moment between its commit and
// its apply; a probe landing there must wait for the apply, not answer 503
// (a load balancer would pull a healthy node out of rotation).
func TestReadyzHoldsUnderWrites(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	const writers, perWriter = 8, 40
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, writers)
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWriter; i++ {
				r := tn.postJSON(t, "/api/v1/links", `{"url":"https://example.com/ready"}`)
				if r.status != 201 {
					errs <- fmt.Errorf("create: %d %s", r.status, r.body)
					return
				}
			}
		}()
	}
	go func() { wg.Wait(); close(done) }()
	probes := 0
	for running := true; running; probes++ {
		select {
		case <-done:
			running = false
		default:
		}
		if r := tn.do(t, "GET", "/readyz", "", nil); r.status != 200 {
			t.Fatalf("readyz during writes (probe %d) = %d %s", probes, r.status, r.body)
		}
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d probes during %d creates, all ready", probes, writers*perWriter)
}

// TestConcurrentCreatesAreDistinct: 400 concurrent creates give 400
// distinct codes, each redirecting to its own URL.
func TestConcurrentCreatesAreDistinct(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	const n = 400
	codes := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tn.postJSON(t, "/api/v1/links", fmt.Sprintf(`{"url":"https://example.com/%d"}`, i))
			if r.status != 201 {
				errs <- fmt.Errorf("create %d: %d %s", i, r.status, r.body)
				return
			}
			codes[i] = r.json(t)["code"].(string)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := make(map[string]int, n)
	for i, c := range codes {
		if j, dup := seen[c]; dup {
			t.Fatalf("code %s issued to creates %d and %d", c, j, i)
		}
		seen[c] = i
	}
	for i, c := range codes {
		r := tn.do(t, "GET", "/"+c, "", nil)
		if r.status != 302 || r.header.Get("Location") != fmt.Sprintf("https://example.com/%d", i) {
			t.Fatalf("code %s: %d %s", c, r.status, r.header.Get("Location"))
		}
	}
}

// TestAliasRace: 20 concurrent creates of one alias give exactly one 201.
func TestAliasRace(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	const n = 20
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			statuses[i] = tn.postJSON(t, "/api/v1/links", fmt.Sprintf(`{"url":"https://example.com/%d","alias":"contested"}`, i)).status
		}()
	}
	close(start)
	wg.Wait()
	won, lost := 0, 0
	for _, s := range statuses {
		switch s {
		case 201:
			won++
		case 409:
			lost++
		default:
			t.Fatalf("unexpected status %d", s)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d created, %d conflicts", won, lost)
	}
}

// TestVisitorPagesShareOneDesign: every page a link's visitor may see
// (no such link, gone, the password form, the preview, a link with limited
// visits to a bot) has the one style, dark colours included when the
// visitor's system asks for them.
func TestVisitorPagesShareOneDesign(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	tn.create(t, `{"url":"https://example.com/p","alias":"guarded","password":"long enough password"}`)
	tn.create(t, `{"url":"https://example.com/v","alias":"previewed"}`)
	tn.create(t, `{"url":"https://example.com/l","alias":"limited","max_visits":3}`)
	tn.create(t, `{"url":"https://example.com/g","alias":"gone-soon"}`)
	tn.do(t, "DELETE", "/api/v1/links/gone-soon", "", nil)
	for _, c := range []struct{ path, ua string }{
		{"/no-such-code", ""}, {"/gone-soon", ""}, {"/guarded", ""}, {"/previewed+", ""}, {"/limited", "Slackbot-LinkExpanding 1.0"},
	} {
		r := tn.do(t, "GET", c.path, "", nil, "Accept", "text/html", "User-Agent", c.ua)
		body := string(r.body)
		if !strings.HasPrefix(r.header.Get("Content-Type"), "text/html") || !strings.Contains(body, "prefers-color-scheme:dark") ||
			!strings.Contains(body, "max-width:36rem") || !strings.Contains(body, `name="viewport"`) {
			t.Errorf("GET %s: %d %s", c.path, r.status, body)
		}
	}
}
