package httpapi_test

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// TestRedirectForwardsTheQuery: a link forwards the request's query by
// default (the destination's own parameters win), through the fast path
// and through net/http alike; forward_query: false, on create or by
// patch, stops it; the link JSON says which.
func TestRedirectForwardsTheQuery(t *testing.T) {
	t.Parallel()
	tn := startNode(t, link.URLPolicy{})
	fwd := tn.create(t, `{"url":"https://example.com/p?src=dest#top","alias":"fwd-q"}`)
	if fwd["forward_query"] != true {
		t.Fatalf("forward_query by default = %v", fwd["forward_query"])
	}
	kept := tn.create(t, `{"url":"https://example.com/k","alias":"keep-q","forward_query":false}`)
	if kept["forward_query"] != false {
		t.Fatalf("forward_query = %v after false", kept["forward_query"])
	}
	served0, _ := tn.fast.Stats()
	for _, c := range []struct{ path, want string }{
		{"/fwd-q?utm_source=news&src=mine", "https://example.com/p?src=dest&utm_source=news#top"},
		{"/fwd-q", "https://example.com/p?src=dest#top"},
		{"/keep-q?utm_source=news", "https://example.com/k"},
	} {
		// On a new connection: the fast path answers. With two
		// X-Forwarded-For headers it declines and net/http answers.
		for _, extra := range []string{"", "X-Forwarded-For: 203.0.113.1\r\nX-Forwarded-For: 203.0.113.2\r\n"} {
			status, loc := rawGet(t, tn.srv.Listener.Addr().String(), c.path, extra)
			if status != 302 || loc != c.want {
				t.Fatalf("GET %s (%q) = %d %q, want %q", c.path, extra, status, loc, c.want)
			}
		}
	}
	if served, _ := tn.fast.Stats(); served-served0 != 3 {
		t.Fatalf("the fast path served %d of the redirects, want 3", served-served0)
	}
	// A patch turns it on and off.
	if r := tn.do(t, "PATCH", "/api/v1/links/keep-q", "application/json", []byte(`{"forward_query":true}`)); r.status != 200 || r.json(t)["forward_query"] != true {
		t.Fatalf("patch forward_query: %d %s", r.status, r.body)
	}
	if r := tn.do(t, "GET", "/keep-q?a=1", "", nil); r.header.Get("Location") != "https://example.com/k?a=1" {
		t.Fatalf("after the patch: %q", r.header.Get("Location"))
	}
	for _, body := range []string{`{"forward_query":"no"}`, `{"forward_query":null}`} {
		if r := tn.do(t, "PATCH", "/api/v1/links/keep-q", "application/json", []byte(body)); r.status != 400 {
			t.Fatalf("patch %s: %d %s", body, r.status, r.body)
		}
	}
	if r := tn.postJSON(t, "/api/v1/links", `{"url":"https://example.com/x","forward_query":1}`); r.status != 400 {
		t.Fatalf("create with forward_query 1: %d %s", r.status, r.body)
	}
}

// rawGet sends GET path on a connection of its own, with extra header
// lines, and returns the status and Location.
func rawGet(t *testing.T, addr, path, extra string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: sho.rt\r\n%sConnection: close\r\n\r\n", path, extra); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}
