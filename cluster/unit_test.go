package cluster

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/linkraft/linkraft/link"
)

// Unit tests of the node's pure parts: no cluster is started.

// mergeAll pages through a listing whose shards answer with answer, from
// the first page until the last (at most 200 pages); it returns the codes
// listed and how many pages held none.
func mergeAll(t *testing.T, shards int, q link.ListQuery, answer func(s int, q link.ListQuery) shardPage) (got []string, empty int) {
	t.Helper()
	for page := 0; ; page++ {
		if page > 200 {
			t.Fatalf("no end after %d pages", page)
		}
		parts := make([]shardPage, shards)
		for s := range parts {
			parts[s] = answer(s, q)
		}
		p := mergePages(parts, q)
		if len(p.Links) == 0 {
			empty++
		}
		for _, l := range p.Links {
			got = append(got, l.Code)
		}
		if p.Next == nil {
			return got, empty
		}
		q.After = p.Next
	}
}

// TestMergePagesStopsWhereAShortPartStops: a shard's answer cut short by
// its size ends the page at its last link, so the next page (past that
// link) still gets the shard's later links in order; pages concatenate to
// the whole ordered set.
func TestMergePagesStopsWhereAShortPartStops(t *testing.T) {
	t.Parallel()
	// Two shards, links interleaved in time; shard 0 answers at most 2
	// links (its size budget), shard 1 up to the limit.
	shards, want := interleaved(12, 2, func(int) bool { return true })
	answer := func(s int, q link.ListQuery) shardPage {
		var out []*link.Link
		for _, l := range shards[s] {
			if q.After == nil || after(link.ListPosition{Created: l.CreatedAt, Code: l.Code}, *q.After, q) {
				out = append(out, l)
			}
		}
		budget := q.Limit
		if s == 0 {
			budget = min(budget, 2)
		}
		if len(out) > budget {
			return shardPage{links: out[:budget], more: true}
		}
		return shardPage{links: out, more: len(out) == q.Limit}
	}
	if got, _ := mergeAll(t, 2, link.ListQuery{Limit: 5}, answer); !slices.Equal(got, want) {
		t.Fatalf("pages = %v, want %v", got, want)
	}
}

// TestMergePagesGoesOnWhereAScanStopped: a shard whose scan budget ran
// out ends the page where it stopped, though no link sits there, and the
// next page goes on from that place: pages (some of them empty) still
// concatenate to the whole filtered set, with no link twice.
func TestMergePagesGoesOnWhereAScanStopped(t *testing.T) {
	t.Parallel()
	// Three shards, links interleaved in time; one link in five passes
	// the filter, and a shard examines 3 index entries a page.
	shards, want := interleaved(60, 3, func(i int) bool { return i%5 == 0 })
	const scan = 3
	answer := func(s int, q link.ListQuery) shardPage {
		var p shardPage
		examined := 0
		for _, l := range shards[s] {
			pos := link.ListPosition{Created: l.CreatedAt, Code: l.Code}
			if q.After != nil && !after(pos, *q.After, q) {
				continue
			}
			if examined == scan {
				return p // stopped at the last one examined
			}
			examined++
			p.stop = &pos
			if i, _ := strconv.Atoi(l.Code[1:]); i%5 == 0 {
				p.links = append(p.links, l)
				if len(p.links) == q.Limit {
					p.more, p.stop = true, nil
					return p
				}
			}
		}
		p.stop = nil // it read to the end
		return p
	}
	for _, limit := range []int{1, 2, 100} {
		got, empty := mergeAll(t, 3, link.ListQuery{Limit: limit}, answer)
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: pages = %v, want %v", limit, got, want)
		}
		if limit == 100 && empty == 0 {
			t.Fatal("no page ended short of a link: the scan budget was never met")
		}
	}
}

// TestTransferGateBacksOff: after a balancing transfer a shard is
// left alone for transferBackoff, and only that shard.
func TestTransferGateBacksOff(t *testing.T) {
	t.Parallel()
	var g transferGate
	t0 := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	if !g.allow(3, t0) {
		t.Fatal("a shard with no failure is held back")
	}
	g.hold(3, t0)
	if g.allow(3, t0.Add(transferBackoff-time.Millisecond)) {
		t.Fatal("a failed shard is retried within the backoff")
	}
	if !g.allow(4, t0) {
		t.Fatal("another shard is held back by shard 3's failure")
	}
	if !g.allow(3, t0.Add(transferBackoff)) {
		t.Fatal("a failed shard is held back after the backoff")
	}
}

// interleaved spreads n links a second apart over shards shards in turn;
// want holds the codes of the links keep passes, in order.
func interleaved(n, shards int, keep func(i int) bool) (parts [][]*link.Link, want []string) {
	t0 := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	parts = make([][]*link.Link, shards)
	for i := range n {
		l := &link.Link{Code: fmt.Sprintf("k%02d", i), CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		parts[i%shards] = append(parts[i%shards], l)
		if keep(i) {
			want = append(want, l.Code)
		}
	}
	return parts, want
}

func TestEligibleBySize(t *testing.T) {
	const mib = 1 << 20
	cases := []struct {
		name  string
		sizes []int64
		want  []bool
	}{
		{"none", nil, nil},
		{"equal", []int64{100 * mib, 100 * mib, 100 * mib}, []bool{true, true, true}},
		{"small ones differ within the slack", []int64{1 * mib, 60 * mib, 2 * mib}, []bool{true, true, true}},
		// mean 400 MiB: the limit is 1.25 × 400 + 64 = 564 MiB.
		{"one far larger", []int64{300 * mib, 300 * mib, 600 * mib}, []bool{true, true, false}},
		{"at the limit", []int64{318 * mib, 318 * mib, 564 * mib}, []bool{true, true, true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := eligibleBySize(c.sizes); !slices.Equal(got, c.want) {
				t.Fatalf("eligibleBySize(%v MiB) = %v, want %v", c.sizes, got, c.want)
			}
		})
	}
}

// focusOf takes one shard in eight of those led here (rounded up), the
// next ones each turn.
func TestFocusOf(t *testing.T) {
	set := func(shards int, ids ...int) []bool {
		out := make([]bool, shards)
		for _, id := range ids {
			out[id] = true
		}
		return out
	}
	cases := []struct {
		name   string
		led    []int
		shards int
		turn   int
		want   []bool
	}{
		{"none led", nil, 8, 0, nil},
		{"8 shards, first turn", []int{1, 4, 6}, 8, 0, set(8, 1)},
		{"8 shards, second turn", []int{1, 4, 6}, 8, 1, set(8, 4)},
		{"8 shards, back to the first", []int{1, 4, 6}, 8, 3, set(8, 1)},
		{"16 shards take two", []int{0, 3, 5}, 16, 0, set(16, 0, 3)},
		{"16 shards, the two after", []int{0, 3, 5}, 16, 1, set(16, 5, 0)},
		{"fewer led than a focus holds", []int{2}, 16, 5, set(16, 2)},
		{"4 shards still take one", []int{0, 2}, 4, 1, set(4, 2)},
		{"9 shards round up to two", []int{1, 7, 8}, 9, 0, set(9, 1, 7)},
	}
	for _, c := range cases {
		if got := focusOf(c.led, c.shards, c.turn); !slices.Equal(got, c.want) {
			t.Errorf("%s: focusOf(%v, %d, %d) = %v, want %v", c.name, c.led, c.shards, c.turn, got, c.want)
		}
	}
}
