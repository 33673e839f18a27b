package cluster_test

import (
	"context"
	"testing"
	"time"
)

// ctx returns a context that ends after a minute or when the test ends: a
// bound on a call that hangs, long enough for the elections a loaded
// machine sees on the way. (It was 20 s; in fresh-clone CI runs beside the
// jepsen package's clusters, writes in four different tests waited out 20 s
// for a shard leader they could reach: these tests are about what calls
// answer, and how long a group goes without a leader under CPU starvation
// is for the benchmarks and the chaos runs to measure.)
func ctx(tb testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	tb.Cleanup(cancel)
	return c
}
