//go:build jepsenbugs

package httpapi

import "github.com/linkraft/linkraft/internal/bugs"

// faultPanic (panic-once): the first redirect the fast path serves in the
// process panics (recovered and logged).
func faultPanic() {
	if bugs.Once(bugs.PanicOnce) {
		panic("jepsen bug panic-once")
	}
}
