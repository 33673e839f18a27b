package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/linkraft/linkraft/link"
)

// The fast path takes exactly the requests the router would hand to the
// redirect handler with a valid code; everything else goes to the router.
func TestRedirectCodeTakesOnlyValidCodes(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", link.MaxAliasLength+1)
	for _, c := range []struct {
		method, target, code string
		ok                   bool
	}{
		{"GET", "/abc", "abc", true},
		{"HEAD", "/Ab_c-9", "Ab_c-9", true},
		{"GET", "/abc?x=1", "abc", true},
		{"POST", "/abc", "", false},
		{"DELETE", "/abc", "", false},
		{"GET", "/", "", false},
		{"GET", "/healthz", "", false},
		{"GET", "/readyz", "", false},
		{"GET", "/metrics", "", false},
		{"GET", "/a/b", "", false},
		{"GET", "/abc/", "", false},
		{"GET", "/a.b", "", false},
		{"GET", "/a%2Fb", "", false},
		{"GET", "/" + long, "", false},
		{"GET", "/api", "api", true}, // the router sends it to /{code} too
	} {
		code, ok := redirectCode(httptest.NewRequest(c.method, c.target, nil))
		if code != c.code || ok != c.ok {
			t.Errorf("%s %s: (%q, %v), want (%q, %v)", c.method, c.target, code, ok, c.code, c.ok)
		}
	}
}
