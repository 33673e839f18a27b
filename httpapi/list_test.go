package httpapi_test

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// listAll pages through GET /api/v1/links?query with key, limit at a time,
// and returns the codes in order.
func listAll(t *testing.T, tn *testNode, key, query string, limit int) []string {
	t.Helper()
	var codes []string
	cursor := ""
	for page := 0; page < 100; page++ {
		path := fmt.Sprintf("/api/v1/links?limit=%d&%s", limit, query)
		if cursor != "" {
			path += "&cursor=" + url.QueryEscape(cursor)
		}
		r := tn.do(t, "GET", path, "", nil, "Authorization", bearer(key))
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		m := r.json(t)
		for _, l := range m["links"].([]any) {
			lj := l.(map[string]any)
			if _, ok := lj["clicks"].(float64); !ok {
				t.Fatalf("a listed link without its clicks: %v", lj)
			}
			codes = append(codes, lj["code"].(string))
		}
		next, _ := m["next_cursor"].(string)
		if next == "" {
			return codes
		}
		cursor = next
	}
	t.Fatal("the listing does not end")
	return nil
}

// TestListLinksOverHTTP: GET /api/v1/links pages with an opaque cursor,
// newest first unless sort=created, filters by tag and text, shows a key
// its own owner's links only (an admin key every owner's, or one), and
// refuses a bad query with 400 and another owner with 403.
func TestListLinksOverHTTP(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	_, alice := tn.makeKey(t, "alice", "alice", "links:read", "links:write", "stats:read")
	_, bob := tn.makeKey(t, "bob", "bob", "links:read", "links:write", "stats:read")
	var aliceCodes []string
	for i := range 7 {
		key, tag := alice, "red"
		if i%3 == 2 {
			key, tag = bob, "blue"
		}
		r := tn.do(t, "POST", "/api/v1/links", "application/json",
			[]byte(fmt.Sprintf(`{"url":"https://example.com/%d","alias":"list-%d","tags":["%s"],"title":"Item %d"}`, i, i, tag, i)), "Authorization", bearer(key))
		if r.status != 201 {
			t.Fatalf("create %d: %d %s", i, r.status, r.body)
		}
		if key == alice {
			aliceCodes = append(aliceCodes, fmt.Sprintf("list-%d", i))
		}
	}
	newestFirst := slices.Clone(aliceCodes)
	slices.Reverse(newestFirst)
	for _, limit := range []int{1, 2, 100} {
		if got := listAll(t, tn, alice, "", limit); !slices.Equal(got, newestFirst) {
			t.Fatalf("alice's listing (limit %d) = %v, want %v", limit, got, newestFirst)
		}
		if got := listAll(t, tn, alice, "sort=created", limit); !slices.Equal(got, aliceCodes) {
			t.Fatalf("alice's listing oldest first (limit %d) = %v, want %v", limit, got, aliceCodes)
		}
	}
	if got := listAll(t, tn, bob, "", 2); !slices.Equal(got, []string{"list-5", "list-2"}) {
		t.Fatalf("bob's listing = %v", got)
	}
	if got := listAll(t, tn, tn.key, "owner=bob&sort=created", 10); !slices.Equal(got, []string{"list-2", "list-5"}) {
		t.Fatalf("the admin's listing of bob = %v", got)
	}
	if got := listAll(t, tn, tn.key, "tag=blue", 10); len(got) != 2 {
		t.Fatalf("every owner's blue links = %v", got)
	}
	if got := listAll(t, tn, alice, "q=item+4", 10); !slices.Equal(got, []string{"list-4"}) {
		t.Fatalf("alice's links about item 4 = %v", got)
	}
	if r := tn.do(t, "GET", "/api/v1/links?owner=bob", "", nil, "Authorization", bearer(alice)); r.status != 403 || r.json(t)["type"] != "/problems/forbidden" {
		t.Fatalf("alice listing bob's links: %d %s", r.status, r.body)
	}
	// By clicks (none here): ties go by creation time.
	if got := listAll(t, tn, alice, "sort=clicks", 2); !slices.Equal(got, aliceCodes) {
		t.Fatalf("alice's listing by clicks = %v, want %v", got, aliceCodes)
	}
	if got := listAll(t, tn, alice, "sort=-clicks", 3); !slices.Equal(got, newestFirst) {
		t.Fatalf("alice's listing by clicks, most first = %v, want %v", got, newestFirst)
	}
	first := tn.do(t, "GET", "/api/v1/links?limit=1", "", nil, "Authorization", bearer(alice)).json(t)["next_cursor"].(string)
	firstByClicks := tn.do(t, "GET", "/api/v1/links?limit=1&sort=-clicks", "", nil, "Authorization", bearer(alice)).json(t)["next_cursor"].(string)
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "sort=name", "sort=visits", "cursor=nonsense",
		"cursor=" + url.QueryEscape(first) + "&sort=created", "cursor=" + url.QueryEscape(first) + "&sort=-clicks",
		"cursor=" + url.QueryEscape(firstByClicks), "cursor=" + url.QueryEscape(firstByClicks) + "&sort=clicks", "created_after=yesterday", "created_before=1969-01-01T00:00:00Z", "expired=maybe",
		"disabled=2", "q=" + url.QueryEscape(string(make([]byte, 300)))} {
		if r := tn.do(t, "GET", "/api/v1/links?"+q, "", nil, "Authorization", bearer(alice)); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%.60s: %d %s", q, r.status, r.body)
		}
	}
	if r := tn.do(t, "HEAD", "/api/v1/links", "", nil, "Authorization", bearer(alice)); r.status != 200 || len(r.body) != 0 {
		t.Fatalf("HEAD: %d", r.status)
	}
	// Tags: alice has 5 red links, bob 2 blue ones.
	if r := tn.do(t, "GET", "/api/v1/tags", "", nil, "Authorization", bearer(alice)); r.status != 200 || string(r.body) != `{"partial":false,"tags":[{"tag":"red","links":5}]}`+"\n" {
		t.Fatalf("alice's tags: %d %q", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/api/v1/tags?limit=1", "", nil); r.status != 200 || r.json(t)["tags"].([]any)[0].(map[string]any)["tag"] != "red" || len(r.json(t)["tags"].([]any)) != 1 {
		t.Fatalf("every owner's top tag: %d %s", r.status, r.body)
	}
	for _, q := range []string{"?owner=bob", "?limit=0"} {
		if r := tn.do(t, "GET", "/api/v1/tags"+q, "", nil, "Authorization", bearer(alice)); r.status < 400 {
			t.Fatalf("tags%s: %d", q, r.status)
		}
	}
}

// TestListByClicksOnANode: on a real node with analytics, redirects are
// counted, flushed through Raft into each shard's click index, and
// sort=-clicks lists the most visited first, with each link's clicks,
// paging with its cursor.
func TestListByClicksOnANode(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{}, func(c *cluster.Config) {
		c.Analytics = &cluster.AnalyticsConfig{FlushInterval: 50 * time.Millisecond}
	})
	visits := map[string]int{"pop-a": 3, "pop-b": 0, "pop-c": 5, "pop-d": 1, "pop-e": 2}
	for code := range visits {
		if r := tn.do(t, "POST", "/api/v1/links", "application/json", []byte(`{"url":"https://example.com/`+code+`","alias":"`+code+`"}`)); r.status != 201 {
			t.Fatalf("create %s: %d %s", code, r.status, r.body)
		}
	}
	for code, n := range visits {
		for range n {
			if r := tn.do(t, "GET", "/"+code, "", nil, "User-Agent", "Mozilla/5.0 (X11; Linux x86_64; rv:130.0) Gecko/20100101 Firefox/130.0"); r.status != 302 {
				t.Fatalf("redirect %s: %d", code, r.status)
			}
		}
	}
	want := []string{"pop-c", "pop-a", "pop-e", "pop-d", "pop-b"}
	var got []string
	defer func() { t.Logf("last listing: %v", got) }()
	testkit.WaitFor(t, 10*time.Second, "the clicks in the listing", func() bool {
		got = listAll(t, tn, tn.key, "sort=-clicks", 2)
		return slices.Equal(got, want)
	})
	m := tn.do(t, "GET", "/api/v1/links?sort=-clicks&limit=1", "", nil).json(t)
	if top := m["links"].([]any)[0].(map[string]any); top["code"] != "pop-c" || top["clicks"] != float64(5) {
		t.Fatalf("the most visited link: %v", top)
	}
	slices.Reverse(want)
	if got := listAll(t, tn, tn.key, "sort=clicks", 3); !slices.Equal(got, want) {
		t.Fatalf("least visited first: %v, want %v", got, want)
	}
}
