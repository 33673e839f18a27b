package cluster_test

import (
	"context"
	"testing"
	"time"
)

// ctx returns a context that ends after 20 s or when the test ends: a
// bound on a call that hangs, long enough for the elections a loaded
// machine sees on the way.
func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	tb.Cleanup(cancel)
	return c
}
