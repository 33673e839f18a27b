package link

import (
	"strings"
	"testing"
)

func TestForwardQuery(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", MaxForwardedQuery)
	for _, c := range []struct{ dest, query, want string }{
		{"https://e.example/p", "", "https://e.example/p"},
		{"https://e.example/p", "utm_source=x", "https://e.example/p?utm_source=x"},
		{"https://e.example/p?a=1", "b=2&c", "https://e.example/p?a=1&b=2&c"},
		// The destination's own parameters win, however they are spelled.
		{"https://e.example/p?a=1&b%20c=2", "a=9&b+c=8&d=4", "https://e.example/p?a=1&b%20c=2&d=4"},
		{"https://e.example/p?", "x=1", "https://e.example/p?x=1"},
		// The fragment stays last.
		{"https://e.example/p?a=1#top", "b=2", "https://e.example/p?a=1&b=2#top"},
		{"https://e.example/p#top", "b=2", "https://e.example/p?b=2#top"},
		// Left out: empty pairs and names, bad escapes, unsafe bytes.
		{"https://e.example/p", "&&=1&a=%zz&b%=1&ok=1", "https://e.example/p?ok=1"},
		{"https://e.example/p", "a=\x01&b=\xff&c=d e&e=1", "https://e.example/p?e=1"},
		{"https://e.example/p", "%zz", "https://e.example/p"},
		// Past the bound, nothing more is added.
		{"https://e.example/p", "a=1&" + long, "https://e.example/p?a=1"},
	} {
		if got := ForwardQuery(c.dest, c.query); got != c.want {
			t.Errorf("ForwardQuery(%q, %q) = %q, want %q", c.dest, c.query, got, c.want)
		}
	}
}

// FuzzForwardQuery: the destination is kept whole around what is added,
// and what is added is bounded and safe in a Location header.
func FuzzForwardQuery(f *testing.F) {
	f.Add("https://e.example/p?a=1#f", "b=2&a=3")
	f.Add("https://e.example/p", "x=%20&y")
	f.Fuzz(func(t *testing.T, dest, query string) {
		got := ForwardQuery(dest, query)
		if got == dest {
			return
		}
		if query == "" {
			t.Fatalf("nothing to add changed %q to %q", dest, got)
		}
		base, frag, hasFrag := strings.Cut(dest, "#")
		path, own, _ := strings.Cut(base, "?")
		prefix := path + "?"
		if own != "" {
			prefix += own + "&"
		}
		suffix := ""
		if hasFrag {
			suffix = "#" + frag
		}
		if !strings.HasPrefix(got, prefix) || !strings.HasSuffix(got, suffix) || len(got) < len(prefix)+len(suffix) {
			t.Fatalf("%q is not %q + params + %q", got, prefix, suffix)
		}
		added := got[len(prefix) : len(got)-len(suffix)]
		if added == "" || len(added) > MaxForwardedQuery || !queryBytesSafe(added) {
			t.Fatalf("added %q (%d bytes)", added, len(added))
		}
	})
}
