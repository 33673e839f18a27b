package cluster_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
)

// TestRecoverAfterLosingTwoOfThree: of three nodes, two are lost for good.
// The survivor, stopped, has every group rewritten to itself alone
// (linknode recover); started, it serves every link it had and takes
// writes; the lost nodes are removed (they are in the placement only), and
// two fresh nodes join and get replicas of every shard, with the links.
func TestRecoverAfterLosingTwoOfThree(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 5, Expect: 3, Shards: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	var before []*link.Link
	for i := range 30 {
		l, err := tc.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://kept.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, l)
	}
	// Every replica has every link before the two are lost.
	testkit.WaitFor(t, 10*time.Second, "every replica caught up", func() bool {
		for _, n := range tc.Live() {
			for _, l := range before {
				if got, err := n.LocalShard(n.Locate(l.Code)).Read(l.Code); err != nil || got.URL != l.URL {
					return false
				}
			}
		}
		return true
	})
	dir := tc.Cfgs[0].DataDir
	if _, err := cluster.RecoverNode(dir, []string{"n1"}); !errors.Is(err, raftgroup.ErrInUse) {
		t.Fatalf("recover of a running node: %v", err)
	}
	tc.CloseAll()
	if _, err := cluster.RecoverNode(dir, []string{"n2"}); !errors.Is(err, cluster.ErrNotSurvivor) {
		t.Fatalf("recover keeping another node: %v", err)
	}
	groups, err := cluster.RecoverNode(dir, []string{"n1"})
	if err != nil || len(groups) != 4 {
		t.Fatalf("recover: %+v, %v", groups, err)
	}
	for _, g := range groups {
		if !slices.Equal(g.Servers, []string{"n1"}) {
			t.Fatalf("%s recovered to %v", g.Group, g.Servers)
		}
	}

	tc.Start(0)
	n := tc.Nodes[0]
	for _, l := range before {
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || got.URL != l.URL {
			t.Fatalf("%s after recovery: %+v, %v", l.Code, got, err)
		}
	}
	after, err := n.Links().Create(ctx(t), link.CreateRequest{URL: "https://after.example/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"n2", "n3"} {
		if err := n.Admin().RemoveNode(ctx(t), id); err != nil {
			t.Fatalf("remove %s: %v", id, err)
		}
	}
	tc.Start(3)
	tc.Start(4)
	testkit.WaitFor(t, 60*time.Second, "three replicas of every shard again", func() bool {
		st := n.Admin().Status()
		if len(st.Shards) != 3 {
			return false
		}
		for _, s := range st.Shards {
			if len(s.Replicas) != 3 || s.Leader == "" {
				return false
			}
		}
		return true
	})
	for _, node := range []*cluster.Node{tc.Nodes[3], tc.Nodes[4]} {
		testkit.WaitFor(t, 30*time.Second, node.ID()+" to hold every link", func() bool {
			for _, l := range append(before, after) {
				sh := node.LocalShard(node.Locate(l.Code))
				if sh == nil {
					return false
				}
				if got, err := sh.Read(l.Code); err != nil || got.URL != l.URL {
					return false
				}
			}
			return true
		})
	}
}
