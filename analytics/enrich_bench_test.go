package analytics

import (
	"strconv"
	"strings"
	"testing"
)

// BenchmarkAgentUniqueLong is the worst a client can make a click cost in
// enrichment: a new 512-byte User-Agent each time (nothing memoised).
func BenchmarkAgentUniqueLong(b *testing.B) {
	e := NewEnricher()
	base := strings.Repeat("Mozilla/5.0 (X11; Linux x86_64) ", 16)[:500]
	for i := 0; b.Loop(); i++ {
		e.Agent(base + strconv.Itoa(i))
	}
}

// BenchmarkAgentUniqueBrowser is a browser UA, new each time.
func BenchmarkAgentUniqueBrowser(b *testing.B) {
	e := NewEnricher()
	base := "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36 "
	for i := 0; b.Loop(); i++ {
		e.Agent(base + strconv.Itoa(i))
	}
}
