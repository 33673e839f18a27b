package fsm

import (
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

// BenchmarkStoredLinkDecode is the codec on the redirect path: a link read
// from bbolt on a cache miss.
func BenchmarkStoredLinkDecode(b *testing.B) {
	now := time.Now()
	v := encodeStoredLink(&link.Link{Code: "abc1234", URL: "https://example.com/some/path?q=1", Owner: "team-a", CreatedAt: now, UpdatedAt: now,
		Redirect: 302, Tags: []string{"a"}, Nonce: 77, Version: 1234})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := decodeStoredLink([]byte("abc1234"), v); err != nil {
			b.Fatal(err)
		}
	}
}
