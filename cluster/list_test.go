package cluster

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/link"
)

// TestListingPagesAcrossShards: on 3 nodes with 2 replicas a shard (so
// every node lists some shards through a peer), random creates by three
// owners, tag changes and deletes; then every node pages through several
// queries, small pages, while creates go on between pages. Every link
// acknowledged before a listing began and not deleted, that passes the
// query, appears exactly once, in order; nothing that fails the query
// does.
func TestListingPagesAcrossShards(t *testing.T) {
	tc := newTestCluster(t, 3, 3)
	for i := range tc.cfgs {
		tc.cfgs[i].ReplicationFactor = 2
	}
	// Node 1 examines 3 index entries a shard per page: its pages end
	// where a scan stopped (short, or empty, with a cursor) and must
	// still concatenate to the whole set.
	tc.cfgs[1].ListScan = 3
	tc.startAll(0, 1, 2)
	tc.waitPlaced(2)
	rng := rand.New(rand.NewPCG(3, 4))
	owners := []string{"alice", "bob", "carol"}
	live := map[string]*link.Link{}
	for i := range 100 {
		n := tc.nodes[rng.IntN(3)]
		req := link.CreateRequest{URL: fmt.Sprintf("https://list.example/%d", i), Owner: owners[rng.IntN(3)],
			Tags: []string{[]string{"red", "blue"}[rng.IntN(2)]}}
		if i%10 == 0 {
			req.Title = "Quarterly report"
		}
		l, err := n.Create(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		live[l.Code] = l
		switch rng.IntN(8) {
		case 0:
			if err := tc.nodes[rng.IntN(3)].Delete(ctx(t), l.Code); err != nil {
				t.Fatal(err)
			}
			delete(live, l.Code)
		case 1:
			tags := []string{"green"}
			if l, err = tc.nodes[rng.IntN(3)].Update(ctx(t), l.Code, link.Patch{Tags: &tags}); err != nil {
				t.Fatal(err)
			}
			live[l.Code] = l
		}
	}
	// Human clicks on most links, one batch a shard, through Raft as a
	// node's analytics flush sends them.
	clicks := map[string]uint64{}
	batches := map[command.ShardID]*command.ClickBatch{}
	for code := range live {
		if h := uint64(rng.IntN(6)); h > 0 {
			clicks[code] = h
			s := tc.nodes[0].ring.Locate(code)
			if batches[s] == nil {
				batches[s] = &command.ClickBatch{Node: "list-test", Seq: 1}
			}
			batches[s].Deltas = append(batches[s].Deltas, command.ClickDelta{Code: code, Delta: command.ClickTotals{Humans: command.Counts{Total: h}}})
		}
	}
	for s, b := range batches {
		if err := tc.nodes[s%3].submitClicks(ctx(t), s, b); err != nil {
			t.Fatal(err)
		}
	}
	queries := []link.ListQuery{{}, {Owner: "bob"}, {Owner: "alice", Tag: "red"}, {Tag: "green"}, {Text: "quarterly"}, {Owner: "carol", Desc: true}, {Desc: true},
		{ByClicks: true, Desc: true}, {Owner: "bob", ByClicks: true}, {Owner: "alice", Tag: "red", ByClicks: true, Desc: true}}
	extra, cutByScan := 0, 0
	var late []*link.Link
	for ni, n := range tc.nodes {
		for qi, base := range queries {
			var want []string
			for _, l := range live {
				if (base.Owner == "" || l.Owner == base.Owner) && base.Matches(l) {
					want = append(want, l.Code)
				}
			}
			q := base
			// Small pages, and pages large enough that each of the 4
			// shards is asked for less than the page (shardLimit).
			q.Limit = []int{2 + rng.IntN(9), 20 + rng.IntN(30)}[rng.IntN(2)]
			seen := map[string]bool{}
			var prev *link.ListPosition
			for page := 0; ; page++ {
				got, err := n.List(ctx(t), q)
				if err != nil {
					t.Fatalf("node %d, query %d: %v", ni, qi, err)
				}
				if len(got.Links) > q.Limit {
					t.Fatalf("a page of %d links for a limit of %d", len(got.Links), q.Limit)
				}
				if len(got.Clicks) != len(got.Links) {
					t.Fatalf("node %d, query %d: %d links, %d click counts", ni, qi, len(got.Links), len(got.Clicks))
				}
				for i, l := range got.Links {
					p := link.ListPosition{Created: l.CreatedAt, Code: l.Code, Clicks: got.Clicks[i]}
					if seen[l.Code] {
						t.Fatalf("node %d, query %d: %s listed twice", ni, qi, l.Code)
					}
					if _, old := live[l.Code]; old && got.Clicks[i] != clicks[l.Code] {
						t.Fatalf("node %d, query %d: %s listed with %d clicks, has %d", ni, qi, l.Code, got.Clicks[i], clicks[l.Code])
					}
					if prev != nil && !after(p, *prev, q) {
						t.Fatalf("node %d, query %d: %s out of order", ni, qi, l.Code)
					}
					if (q.Owner != "" && l.Owner != q.Owner) || !q.Matches(l) || l.Deleted {
						t.Fatalf("node %d, query %d: %+v does not pass the query", ni, qi, l)
					}
					seen[l.Code], prev = true, &p
				}
				// Writes go on between the first pages; they may or may
				// not show (oldest first, a listing that kept chasing new
				// links would not end).
				if page < 5 {
					if l, err := tc.nodes[page%3].Create(ctx(t), link.CreateRequest{URL: "https://list.example/late", Owner: owners[page%3], Tags: []string{"red"}}); err == nil {
						extra++
						late = append(late, l)
					}
				}
				if got.Next == nil {
					break
				}
				if len(got.Links) == 0 {
					if ni != 1 {
						t.Fatalf("node %d, query %d: an empty page with a cursor, with no scan budget met", ni, qi)
					}
					cutByScan++ // only a scan stop ends a page before any link
				}
				if page > 400 {
					t.Fatal("the listing does not end")
				}
				q.After = got.Next
			}
			for _, c := range want {
				if !seen[c] {
					t.Fatalf("node %d, query %d: %s missing (%d of %d listed)", ni, qi, c, len(seen), len(want))
				}
			}
		}
	}
	if extra == 0 {
		t.Fatal("no write went on between pages")
	}
	if cutByScan == 0 {
		t.Fatal("no page of node 1 ended where a scan stopped, before any link")
	}
	// Tag counts, every owner's and one's, through every node.
	for _, l := range late {
		live[l.Code] = l
	}
	for _, owner := range []string{"", "bob"} {
		want := map[string]uint64{}
		for _, l := range live {
			if owner == "" || l.Owner == owner {
				for _, tag := range l.Tags {
					want[tag]++
				}
			}
		}
		for ni, n := range tc.nodes {
			tags, partial, err := n.Tags(ctx(t), owner, 100)
			got := map[string]uint64{}
			for _, tc := range tags {
				got[tc.Tag] = tc.Links
			}
			if err != nil || partial || !maps.Equal(got, want) {
				t.Fatalf("node %d, owner %q: tags %v (partial %v, %v), want %v", ni, owner, got, partial, err, want)
			}
		}
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
