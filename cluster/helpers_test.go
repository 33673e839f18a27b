package cluster_test

import (
	"context"
	"testing"
	"time"
)

// ctx returns a context that ends after 10 s or when the test ends.
func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	tb.Cleanup(cancel)
	return c
}
