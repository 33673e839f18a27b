package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// benchCodes creates n links on tn and returns their codes.
func benchCodes(b *testing.B, tn *testNode, n int) []string {
	codes := make([]string, n)
	for i := range codes {
		codes[i] = tn.create(b, fmt.Sprintf(`{"url":"https://www.example.com/some/path/%d?utm_source=bench"}`, i))["code"].(string)
	}
	return codes
}

// BenchmarkRedirect is GET /{code} on a real single-node cluster (Raft,
// bbolt, cache warm), analytics off: through the handler alone
// (httptest.ResponseRecorder, no network), and through a loopback HTTP
// connection with a keep-alive client, both in parallel.
func BenchmarkRedirect(b *testing.B) {
	tn := startNode(b, link.URLPolicy{})
	codes := benchCodes(b, tn, 1000)
	h := tn.srv.Config.Handler
	reqs := make([]*http.Request, len(codes)) // the handler only reads them
	for i, c := range codes {
		reqs[i] = httptest.NewRequest(http.MethodGet, "/"+c, nil)
	}
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				req := reqs[i%len(reqs)]
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusFound {
					b.Fatalf("status %d", rec.Code)
				}
				i++
			}
		})
	})
	b.Run("loopback", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				resp, err := tn.client.Get(tn.srv.URL + "/" + codes[i%len(codes)])
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusFound {
					b.Fatalf("status %d", resp.StatusCode)
				}
				i++
			}
		})
	})
}

// BenchmarkKeyCheck is what an API key costs each /api/v1 request: the
// SHA-256 of the secret and a lookup in the node's key cache (an atomic
// load while no key changed), in parallel.
func BenchmarkKeyCheck(b *testing.B) {
	tn := startNode(b, link.URLPolicy{})
	for i := range 100 { // a cluster with some keys
		tn.makeKey(b, fmt.Sprintf("k%d", i), "team", "links:read")
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := tn.roles.keys.Authenticate(tn.key); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRedirectRules is what redirect rules cost a browser's redirect
// through the handler (net/http; the fast path runs the same code): 1,000
// links without rules, then 1,000 with three (device, country, language)
// that the request, a desktop Chrome with Accept-Language, does not match,
// so that every rule is tried.
func BenchmarkRedirectRules(b *testing.B) {
	tn := startNode(b, link.URLPolicy{})
	plain := benchCodes(b, tn, 1000)
	ruled := make([]string, 1000)
	for i := range ruled {
		ruled[i] = tn.create(b, fmt.Sprintf(`{"url":"https://www.example.com/some/path/%d?utm_source=bench","rules":[
			{"device":"ios","url":"https://apps.example/ios"},{"country":"DE","url":"https://example.de/"},
			{"language":"fr","url":"https://example.fr/"}]}`, i))["code"].(string)
	}
	h := tn.srv.Config.Handler
	for _, c := range []struct {
		name  string
		codes []string
	}{{"no rules", plain}, {"3 rules", ruled}} {
		reqs := make([]*http.Request, len(c.codes))
		for i, code := range c.codes {
			reqs[i] = httptest.NewRequest(http.MethodGet, "/"+code, nil)
			reqs[i].Header.Set("User-Agent", uaDesktop)
			reqs[i].Header.Set("Accept-Language", "en-GB,en;q=0.9,de;q=0.5")
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, reqs[i%len(reqs)])
					if rec.Code != http.StatusFound || rec.Header().Get("Location") != "https://www.example.com/some/path/"+strconv.Itoa(i%len(reqs))+"?utm_source=bench" {
						b.Fatalf("%d %v", rec.Code, rec.Header())
					}
					i++
				}
			})
		})
	}
}
