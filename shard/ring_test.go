package shard

import (
	"testing"

	"github.com/linkraft/linkraft/command"
)

// TestRingPinsPlacement pins code → shard answers of buraksezer/consistent
// v1.1.0 with xxhash64, 271 partitions, load 1.25 and 8 shards. If a library
// upgrade moves keys, this fails before any stored link becomes unreachable.
func TestRingPinsPlacement(t *testing.T) {
	r, err := NewRing(RingConfig{Shards: 8})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]command.ShardID{"abc": 4, "0000001": 4, "hello-world": 4, "Zz9_x": 0, "aaaaaaa": 5, "github": 7, "x": 4}
	for code, shard := range want {
		if got := r.Locate(code); got != shard {
			t.Errorf("Locate(%q) = %d, pinned %d: placement changed", code, got, shard)
		}
	}
	counts := make([]int, 8)
	for p := range r.owner {
		counts[r.owner[p]]++
	}
	max := 0
	for _, n := range counts {
		if n > max {
			max = n
		}
	}
	// consistent's bound: ceil(271/8 × 1.25) = 43 partitions at most.
	if max > 43 {
		t.Fatalf("a shard owns %d partitions: %v", max, counts)
	}
}

func TestRingRejectsBadConfig(t *testing.T) {
	for _, cfg := range []RingConfig{{Shards: 0}, {Shards: 8, PartitionCount: 4}, {Shards: 8, Load: 0.5}, {Shards: 5000}, {Shards: 8, Hasher: "md5"}, {Shards: 8, VNodes: -1}} {
		if _, err := NewRing(cfg); err == nil {
			t.Errorf("NewRing(%+v) accepted", cfg)
		}
	}
}
