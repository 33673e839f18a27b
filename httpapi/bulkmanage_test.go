package httpapi_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestBulkUpdateAndDelete: one patch or delete over listed codes or over
// a tag filter, answered per code as the single routes would (another
// owner's link is 404, a deleted one 410); a malformed request changes
// nothing.
func TestBulkUpdateAndDelete(t *testing.T) {
	t.Parallel()
	tn := startFake(t, link.URLPolicy{}, nil)
	_, alice := tn.makeKey(t, "alice", "alice", "links:read", "links:write")
	for i := range 6 {
		tag := "old"
		if i >= 4 {
			tag = "keep"
		}
		if r := tn.do(t, "POST", "/api/v1/links", "application/json",
			[]byte(fmt.Sprintf(`{"url":"https://example.com/%d","alias":"bm-%d","tags":["%s"]}`, i, i, tag)), "Authorization", bearer(alice)); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	tn.create(t, `{"url":"https://example.com/admins","alias":"bm-admin","tags":["old"]}`)
	post := func(path, body string) response {
		return tn.do(t, "POST", path, "application/json", []byte(body), "Authorization", bearer(alice))
	}
	r := post("/api/v1/links/bulk-update", `{"codes":["bm-0","bm-1","bm-admin","nope!"],"patch":{"disabled":true,"title":"Off"}}`)
	m := r.json(t)
	if r.status != 200 || m["updated"] != float64(2) || m["failed"] != float64(2) {
		t.Fatalf("bulk update: %d %s", r.status, r.body)
	}
	res := m["results"].([]any)
	if res[0].(map[string]any)["link"].(map[string]any)["disabled"] != true || res[2].(map[string]any)["status"] != float64(404) || res[3].(map[string]any)["status"] != float64(404) {
		t.Fatalf("results %v", res)
	}
	if got := tn.do(t, "GET", "/api/v1/links/bm-admin", "", nil).json(t); got["disabled"] != false {
		t.Fatalf("another owner's link changed: %v", got)
	}
	// By tag: alice's "old" links (bm-0..3), not the admin's.
	r = post("/api/v1/links/bulk-delete", `{"filter":{"tag":"old"}}`)
	if m := r.json(t); r.status != 200 || m["deleted"] != float64(4) || m["failed"] != float64(0) || m["truncated"] != false {
		t.Fatalf("bulk delete by tag: %d %s", r.status, r.body)
	}
	for i, want := range []int{410, 410, 410, 410, 302, 302} {
		if r := tn.do(t, "GET", fmt.Sprintf("/bm-%d", i), "", nil, "Authorization", ""); r.status != want {
			t.Fatalf("bm-%d: %d, want %d", i, r.status, want)
		}
	}
	if r := tn.do(t, "GET", "/bm-admin", "", nil, "Authorization", ""); r.status != 302 {
		t.Fatalf("the admin's old link: %d", r.status)
	}
	if r := post("/api/v1/links/bulk-delete", `{"codes":["bm-0"]}`); !strings.Contains(string(r.body), `"status":410`) {
		t.Fatalf("deleting again: %s", r.body)
	}
	before := tn.do(t, "GET", "/api/v1/links/export", "", nil).body
	for _, c := range []struct{ path, body string }{
		{"/api/v1/links/bulk-update", `{"codes":["bm-4"]}`},
		{"/api/v1/links/bulk-update", `{"codes":["bm-4"],"patch":{}}`},
		{"/api/v1/links/bulk-update", `{"codes":["bm-4"],"patch":{"colour":"red"}}`},
		{"/api/v1/links/bulk-update", `{"codes":["bm-4"],"patch":{"url":"javascript:alert(1)"}}`},
		{"/api/v1/links/bulk-update", `{"codes":["bm-4"],"filter":{"tag":"keep"},"patch":{"disabled":true}}`},
		{"/api/v1/links/bulk-delete", `{"codes":[]}`},
		{"/api/v1/links/bulk-delete", `{"codes":["bm-4"],"patch":{"disabled":true}}`},
		{"/api/v1/links/bulk-delete", `{"filter":{}}`},
		{"/api/v1/links/bulk-delete", `{"filter":{"tag":"keep"},"extra":1}`},
		{"/api/v1/links/bulk-delete", `{"codes":["` + strings.Repeat(`x","`, 1000) + `x"]}`},
		{"/api/v1/links/bulk-delete", `not json`},
	} {
		if r := post(c.path, c.body); r.status != 400 || r.header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %.60s: %d %s", c.path, c.body, r.status, r.body)
		}
	}
	if r := post("/api/v1/links/bulk-delete", `{"filter":{"tag":"keep","owner":"admin"}}`); r.status != 403 {
		t.Fatalf("another owner's filter: %d", r.status)
	}
	if after := tn.do(t, "GET", "/api/v1/links/export", "", nil).body; string(after) != string(before) {
		t.Fatal("a refused bulk request changed links")
	}
}
