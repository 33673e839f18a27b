package cluster_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
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
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	for i := range tc.Cfgs {
		tc.Cfgs[i].ReplicationFactor = 2
	}
	// Node 1 examines 3 index entries a shard per page: its pages end
	// where a scan stopped (short, or empty, with a cursor) and must
	// still concatenate to the whole set.
	tc.Cfgs[1].ListScan = 3
	tc.StartAll(0, 1, 2)
	tc.WaitPlaced(2)
	rng := rand.New(rand.NewPCG(3, 4))
	owners := []string{"alice", "bob", "carol"}
	live := map[string]*link.Link{}
	for i := range 100 {
		n := tc.Nodes[rng.IntN(3)]
		req := link.CreateRequest{URL: fmt.Sprintf("https://list.example/%d", i), Owner: owners[rng.IntN(3)],
			Tags: []string{[]string{"red", "blue"}[rng.IntN(2)]}}
		if i%10 == 0 {
			req.Title = "Quarterly report"
		}
		l, err := n.Links().Create(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		live[l.Code] = l
		// A change whose outcome is unknown (a leader lost mid-commit
		// under load) is sent again: both are the same either way.
		switch rng.IntN(8) {
		case 0:
			via, tries := tc.Nodes[rng.IntN(3)], 0
			testkit.Eventually(t, 20*time.Second, func() error {
				err := via.Links().Delete(ctx(t), l.Code)
				if tries++; tries > 1 && errors.Is(err, link.ErrDeleted) {
					return nil
				}
				return err
			})
			delete(live, l.Code)
		case 1:
			tags := []string{"green"}
			via := tc.Nodes[rng.IntN(3)]
			code := l.Code
			testkit.Eventually(t, 20*time.Second, func() error {
				u, err := via.Links().Update(ctx(t), code, link.Patch{Tags: &tags})
				if err == nil {
					l = u // a failed try leaves l as it was
				}
				return err
			})
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
			s := tc.Nodes[0].Locate(code)
			if batches[s] == nil {
				batches[s] = &command.ClickBatch{Node: "list-test", Seq: 1}
			}
			batches[s].Deltas = append(batches[s].Deltas, command.ClickDelta{Code: code, Delta: command.ClickTotals{Humans: command.Counts{Total: h}}})
		}
	}
	for s, b := range batches {
		// A batch is applied once per (node, seq) whatever the tries, so
		// one whose outcome is unknown (leadership lost mid-commit under
		// load) is sent again.
		testkit.Eventually(t, 20*time.Second, func() error {
			return tc.Nodes[s%3].SubmitClicks(ctx(t), s, b)
		})
	}
	queries := []link.ListQuery{{}, {Owner: "bob"}, {Owner: "alice", Tag: "red"}, {Tag: "green"}, {Text: "quarterly"}, {Owner: "carol", Desc: true}, {Desc: true},
		{ByClicks: true, Desc: true}, {Owner: "bob", ByClicks: true}, {Owner: "alice", Tag: "red", ByClicks: true, Desc: true}}
	extra, cutByScan := 0, 0
	var late []*link.Link
	for ni, n := range tc.Nodes {
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
				got, err := n.Links().List(ctx(t), q)
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
					if prev != nil && !cluster.After(p, *prev, q) {
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
					if l, err := tc.Nodes[page%3].Links().Create(ctx(t), link.CreateRequest{URL: "https://list.example/late", Owner: owners[page%3], Tags: []string{"red"}}); err == nil {
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
		for ni, n := range tc.Nodes {
			tags, partial, err := n.Links().Tags(ctx(t), owner, 100)
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
