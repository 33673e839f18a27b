package command

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/axiomhq/hyperloglog"
	"github.com/google/go-cmp/cmp"

	"github.com/linkraft/linkraft/internal/wire"
	"github.com/linkraft/linkraft/link"
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

// TestMergeInPlaceMatchesMaps: the in-place merge leaves exactly the
// bytes that decoding into maps, MergeTotals and AppendTo would, over
// random batches whose breakdowns overflow the cap.
func TestMergeInPlaceMatchesMaps(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	var want ClickTotals
	var stored []byte
	var d Delta
	var m TotalsMerger
	for i := range 60 {
		maxKeys := 5
		if i%3 == 0 {
			maxKeys = 300 // overflows the cap within a few rounds
		}
		add := ClickTotals{Humans: randomCounts(t, rng, maxKeys), Bots: randomCounts(t, rng, maxKeys)}
		MergeTotals(&want, &add)
		b := &ClickBatch{Node: "n1", Seq: uint64(i + 1), Deltas: []ClickDelta{{Code: "abc", Delta: add, Hours: []HourCount{{Hour: uint64(i), Humans: 1}}}}}
		entry := b.Encode()
		spec, _ := Lookup(Type(entry[0]))
		if _, err := spec.Parse(entry[1:]); err != nil {
			t.Fatal(err)
		}
		deltas := 0
		_, _, err := ReadClickBatch(entry[1:], func(body []byte) error {
			deltas++
			if err := d.Parse(body); err != nil {
				return err
			}
			if string(d.Code) != "abc" {
				t.Fatalf("delta of %q", d.Code)
			}
			if err := m.Add(&d); err != nil {
				return err
			}
			out, err := m.Merge(stored)
			stored = bytes.Clone(out)
			return err
		})
		if err != nil || deltas != 1 {
			t.Fatalf("round %d: %d deltas, %v", i, deltas, err)
		}
		if w := want.AppendTo(nil); !bytes.Equal(w, stored) {
			var got ClickTotals
			err := got.Unmarshal(stored)
			t.Fatalf("round %d: merged totals differ from the map merge (%v; -want +got):\n%s", i, err, cmp.Diff(want, got))
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
	t.Parallel()
	ps := normalizePairs([]pair{{[]byte("b"), 1}, {[]byte("a"), 2}, {[]byte("b"), 3}})
	got := map[string]uint64{}
	for _, p := range ps {
		got[string(p.key)] = p.n
	}
	if d := cmp.Diff(map[string]uint64{"a": 2, "b": 4}, got); d != "" || len(ps) != 2 || string(ps[0].key) != "a" {
		t.Fatalf("normalizePairs = %v (%s)", ps, d)
	}
}

func sketch(tb testing.TB, visitors ...string) []byte {
	tb.Helper()
	s := hyperloglog.New14()
	for _, v := range visitors {
		s.Insert([]byte(v))
	}
	b, err := s.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestCreateBatchDecodeRejectsEmpty(t *testing.T) {
	t.Parallel()
	if _, err := Decode([]byte{byte(TypeCreateBatch)}); !errors.Is(err, wire.ErrDecode) {
		t.Fatalf("empty batch decoded: %v", err)
	}
}

// TestLightReaders: HumanClicks and ViewRecord read what the full
// decoders read.
func TestLightReaders(t *testing.T) {
	tot := ClickTotals{Humans: Counts{Total: 42, Countries: map[string]uint64{"DE": 42}, Visitors: []byte{1}}, Bots: Counts{Total: 7}}
	if n, err := HumanClicks(tot.AppendTo(nil)); err != nil || n != 42 {
		t.Fatalf("HumanClicks = %d, %v", n, err)
	}
	if n, err := HumanClicks(nil); err != nil || n != 0 {
		t.Fatalf("HumanClicks(nil) = %d, %v", n, err)
	}
	if _, err := HumanClicks([]byte{0x0a, 0x05, 0x08}); err == nil {
		t.Fatal("a cut record read without an error")
	}
	t0 := time.Date(2026, 11, 27, 7, 0, 0, 123, time.UTC)
	for _, l := range []*link.Link{
		{Code: "abc", URL: "https://e.example", Owner: "team-a", CreatedAt: t0, Deleted: true, Tags: []string{"x"}},
		{Code: "abd", URL: "https://e.example", Owner: "", CreatedAt: t0.Add(time.Hour), Title: "t"},
	} {
		v, err := ViewRecord(EncodeRecord(l))
		if err != nil || string(v.Owner) != l.Owner || !v.Created.Equal(l.CreatedAt) || v.Deleted != l.Deleted ||
			string(v.URL) != l.URL || string(v.Title) != l.Title {
			t.Fatalf("ViewRecord(%+v) = %+v %v", l, v, err)
		}
	}
}
