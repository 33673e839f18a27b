package fsm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	bolt "go.etcd.io/bbolt"
)

// randomCounts draws breakdowns from a pool of keys that straddles the
// cap (MaxBreakdownKeys) and includes OtherKey, the empty key and keys
// that sort before and after it.
func randomCounts(tb testing.TB, rng *rand.Rand, maxKeys int) Counts {
	pool := func(i int) string {
		switch i {
		case 0:
			return OtherKey
		case 1:
			return ""
		case 2:
			return "!first"
		case 3:
			return "&amp"
		}
		return fmt.Sprintf("k%03d", i)
	}
	c := Counts{Total: rng.Uint64N(1000)}
	for _, m := range []*map[string]uint64{&c.Countries, &c.Devices, &c.Browsers, &c.OS, &c.Referrers} {
		n := rng.IntN(maxKeys + 1)
		if n == 0 {
			continue
		}
		*m = map[string]uint64{}
		for range n {
			(*m)[pool(rng.IntN(MaxBreakdownKeys+200))] += 1 + rng.Uint64N(50)
		}
	}
	if rng.IntN(2) == 0 {
		vs := make([]string, rng.IntN(20))
		for i := range vs {
			vs[i] = fmt.Sprint(rng.IntN(100))
		}
		c.Visitors = sketch(tb, vs...)
	}
	return c
}

// TestMergeInPlaceMatchesMaps: the in-place merge of the FSM leaves exactly
// the bytes that decoding into maps, MergeTotals and appendTotals would,
// over random batches whose breakdowns overflow the cap.
func TestMergeInPlaceMatchesMaps(t *testing.T) {
	f := mustShard(t, ShardConfig{})
	applyAt(t, f, 1, (&CreateIfAbsent{Code: "abc", URL: "https://e.example", Now: t0}).Encode())
	rng := rand.New(rand.NewPCG(1, 2))
	var want ClickTotals
	for i := range 60 {
		maxKeys := 5
		if i%3 == 0 {
			maxKeys = 300 // overflows the cap within a few rounds
		}
		d := ClickTotals{Humans: randomCounts(t, rng, maxKeys), Bots: randomCounts(t, rng, maxKeys)}
		if err := MergeTotals(&want, &d); err != nil {
			t.Fatal(err)
		}
		b := &ClickBatch{Node: "n1", Seq: uint64(i + 1), Deltas: []ClickDelta{{Code: "abc", Delta: d}}}
		applyAt(t, f, uint64(i+2), b.Encode())
		var got []byte
		if err := f.view(func(tx *bolt.Tx) error {
			got = append([]byte(nil), tx.Bucket(bucketClicks).Get([]byte("abc"))...)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(appendTotals(nil, &want), got); d != "" {
			t.Fatalf("round %d: stored totals differ from the map merge (-want +got):\n%s", i, d)
		}
	}
	for _, c := range []*Counts{&want.Humans, &want.Bots} {
		if len(c.Referrers) < MaxBreakdownKeys || c.Referrers[OtherKey] == 0 {
			t.Fatalf("the test did not overflow the cap: %d referrers", len(c.Referrers))
		}
	}
}

// TestMergePairsNormalises: out-of-order and repeated keys (which no node
// sends, but a replica must treat alike) are summed as a map would.
func TestMergePairsNormalises(t *testing.T) {
	ps := normalizePairs([]pair{{[]byte("b"), 1}, {[]byte("a"), 2}, {[]byte("b"), 3}})
	got := map[string]uint64{}
	for _, p := range ps {
		got[string(p.key)] = p.n
	}
	if d := cmp.Diff(map[string]uint64{"a": 2, "b": 4}, got); d != "" || len(ps) != 2 || string(ps[0].key) != "a" {
		t.Fatalf("normalizePairs = %v (%s)", ps, d)
	}
}
