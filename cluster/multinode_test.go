package cluster_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/raftgroup"
)

func TestFormationInAnyStartOrder(t *testing.T) {
	t.Parallel()
	for _, order := range [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}} {
		t.Run(fmt.Sprint(order), func(t *testing.T) {
			tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
			tc.StartAll(order...)
			tc.WaitReplicated(3)
			tc.WaitBalanced()
			cid := tc.Nodes[0].Settings().ClusterID
			for _, n := range tc.Nodes {
				if n.Settings().ClusterID != cid {
					t.Fatalf("two clusters formed: %s and %s", cid, n.Settings().ClusterID)
				}
				st := n.Admin().Status()
				if len(st.Meta.Replicas) != 3 || len(st.Nodes) != 3 {
					t.Fatalf("%s sees meta %v, nodes %v", n.ID(), st.Meta.Replicas, st.Nodes)
				}
			}
			// A write on one node is readable everywhere at once.
			l, err := tc.Nodes[order[2]].Links().Create(ctx(t), link.CreateRequest{URL: "https://formed.example"})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.Nodes {
				got, err := n.Links().Resolve(ctx(t), l.Code)
				if err != nil || got.URL != "https://formed.example" {
					t.Fatalf("%s: %+v, %v", n.ID(), got, err)
				}
			}
		})
	}
}

func TestReadYourWritesOnEveryNode(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	for i := 0; i < 60; i++ {
		writer := tc.Nodes[i%3]
		req := link.CreateRequest{URL: fmt.Sprintf("https://ryw.example/%d", i)}
		if i%4 == 0 {
			req.Alias = fmt.Sprintf("ryw-%d", i)
			// Ask for it everywhere first: a miss must not be remembered
			// in a way that hides the create.
			for _, n := range tc.Nodes {
				if _, err := n.Links().Resolve(ctx(t), req.Alias); !errors.Is(err, link.ErrNotFound) {
					t.Fatalf("before create: %v", err)
				}
			}
		}
		l, err := writer.Links().Create(ctx(t), req)
		if err != nil {
			t.Fatal(err)
		}
		// No polling: read-your-writes must hold immediately on every node.
		for _, n := range tc.Nodes {
			got, err := n.Links().Resolve(ctx(t), l.Code)
			if err != nil || got.URL != req.URL {
				t.Fatalf("create %d on %s, read on %s: %+v, %v", i, writer.ID(), n.ID(), got, err)
			}
			got, err = n.Links().Get(ctx(t), l.Code, true)
			if err != nil || got.URL != req.URL {
				t.Fatalf("consistent read on %s: %+v, %v", n.ID(), got, err)
			}
		}
	}
}

func TestUpdateAndDeleteVisibleEverywhere(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	l, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://v1.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.Nodes { // warm every cache with v1
		if _, err := n.Links().Resolve(ctx(t), l.Code); err != nil {
			t.Fatal(err)
		}
	}
	v2 := "https://v2.example"
	if _, err := tc.Nodes[1].Links().Update(ctx(t), l.Code, link.Patch{URL: &v2}); err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.Nodes {
		// Consistent reads see it at once; redirects within the apply lag.
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || got.URL != v2 {
			t.Fatalf("consistent read on %s after update: %+v, %v", n.ID(), got, err)
		}
		testkit.WaitFor(t, 5*time.Second, "update on "+n.ID(), func() bool {
			got, err := n.Links().Resolve(ctx(t), l.Code)
			return err == nil && got.URL == v2
		})
	}
	if err := tc.Nodes[2].Links().Delete(ctx(t), l.Code); err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.Nodes {
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || !got.Deleted || got.Owner != l.Owner {
			t.Fatalf("consistent read on %s after delete: %+v, %v; want the tombstone", n.ID(), got, err)
		}
		testkit.WaitFor(t, 5*time.Second, "delete on "+n.ID(), func() bool {
			got, err := n.Links().Resolve(ctx(t), l.Code)
			return err == nil && got.Deleted
		})
	}
}

func TestAliasRacedFromAllNodesHasOneWinner(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	const racers = 21
	var wg sync.WaitGroup
	results := make([]error, racers)
	start := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, results[i] = tc.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://race.example/%d", i), Alias: "raced"})
		}()
	}
	close(start)
	wg.Wait()
	won := 0
	for _, err := range results {
		switch {
		case err == nil:
			won++
		case errors.Is(err, link.ErrAliasTaken):
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	if won != 1 {
		t.Fatalf("%d winners", won)
	}
}

// leaderOfMost returns the index of the node leading the most shards.
func leaderOfMost(tc *testcluster.Cluster) int {
	counts := map[string]int{}
	for _, n := range tc.Live() {
		for _, s := range n.LocalShards() {
			if s.Group().IsLeader() {
				counts[n.ID()]++
			}
		}
	}
	best, bestN := 0, -1
	for i, n := range tc.Nodes {
		if n != nil && counts[n.ID()] > bestN {
			best, bestN = i, counts[n.ID()]
		}
	}
	return best
}

func TestLeaderStopWritesResumeAndNodeCatchesUp(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	var before []*link.Link
	for i := 0; i < 10; i++ {
		l, err := tc.Nodes[i%3].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://before.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		before = append(before, l)
	}
	victim := leaderOfMost(tc)
	tc.Stop(victim)
	survivor := tc.Nodes[(victim+1)%3]
	// Writes resume on the survivors (after new elections).
	var during []*link.Link
	for i := 0; i < 20; i++ {
		l, err := survivor.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://during.example/%d", i)})
		if err != nil {
			t.Fatalf("write %d with a node down: %v", i, err)
		}
		during = append(during, l)
	}
	for _, n := range tc.Live() {
		for _, l := range append(before, during...) {
			if got, err := n.Links().Resolve(ctx(t), l.Code); err != nil || got.URL != l.URL {
				t.Fatalf("%s lost %s: %+v, %v", n.ID(), l.Code, got, err)
			}
		}
	}
	// The stopped node comes back on its data and catches up locally.
	tc.Start(victim)
	back := tc.Nodes[victim]
	waitHoldsLocally(t, back, during, "catch-up")
	tc.WaitReplicated(3)
	tc.WaitBalanced()
}

func TestRetriedCreateMakesOneLink(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	// The same create command (code and nonce fixed) proposed twice, as
	// after an unknown outcome: one link, the same answer both times.
	cmd := struct{ code string }{"retry-me"}
	first, err := applyCreateCmd(ctx(t), tc.Nodes[0], cmd.code, 77, "https://retry.example")
	if err != nil {
		t.Fatal(err)
	}
	again, err := applyCreateCmd(ctx(t), tc.Nodes[1], cmd.code, 77, "https://retry.example")
	if err != nil || again.Version != first.Version {
		t.Fatalf("retry = %+v, %v; first %+v", again, err, first)
	}
	if _, err := applyCreateCmd(ctx(t), tc.Nodes[2], cmd.code, 78, "https://other.example"); !errors.Is(err, link.ErrAliasTaken) {
		t.Fatalf("other nonce: %v", err)
	}
}

func TestLateNodeJoinsAndServes(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 4, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	l, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://early.example"})
	if err != nil {
		t.Fatal(err)
	}
	tc.Start(3) // joins through the first three; replicas move to it
	late := tc.Nodes[3]
	testkit.WaitFor(t, 20*time.Second, "late node in the meta group", func() bool {
		return len(tc.Nodes[0].Admin().Status().Meta.Replicas) == 4
	})
	if got, err := late.Links().Resolve(ctx(t), l.Code); err != nil || got.URL != "https://early.example" {
		t.Fatalf("late node resolve: %+v, %v", got, err)
	}
	l2, err := late.Links().Create(ctx(t), link.CreateRequest{URL: "https://late.example"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.Nodes {
		if got, err := n.Links().Get(ctx(t), l2.Code, true); err != nil || got.URL != "https://late.example" {
			t.Fatalf("%s: %+v, %v", n.ID(), got, err)
		}
	}
	// The late node caches links of shards it does not host; an update or a
	// delete reaches it by gossip well before the cache TTL (30 s). With
	// four nodes and three replicas it hosts three of the four shards once
	// the replicas have spread: take a link of the fourth.
	tc.WaitSpread(3, 60*time.Second)
	if k := len(late.LocalShards()); k != 3 {
		t.Fatalf("late node hosts %d shards", k)
	}
	for i := 0; late.LocalShard(late.Locate(l.Code)) != nil; i++ {
		if i == 200 {
			t.Fatal("no link on a shard the late node lacks")
		}
		if l, err = tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://early.example"}); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := late.Links().Resolve(ctx(t), l.Code); err != nil || got.URL != "https://early.example" {
		t.Fatalf("late node resolve: %+v, %v", got, err)
	}
	if _, ok := late.CachedRemote(l.Code); !ok {
		t.Fatal("the late node did not cache the remote link")
	}
	v2 := "https://early-v2.example"
	if _, err := tc.Nodes[1].Links().Update(ctx(t), l.Code, link.Patch{URL: &v2}); err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, 10*time.Second, "the update on the late node", func() bool {
		got, err := late.Links().Resolve(ctx(t), l.Code)
		return err == nil && got.URL == v2
	})
	if err := tc.Nodes[2].Links().Delete(ctx(t), l.Code); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() error {
		got, err := late.Links().Resolve(ctx(t), l.Code)
		if err == nil && got.Deleted {
			return nil
		}
		e, _ := late.CachedRemote(l.Code)
		return fmt.Errorf("the delete has not reached the late node: resolve %+v, %v; cache entry %+v", got, err, e)
	})
}

// applyCreateCmd proposes a create with a fixed code and nonce (tests of
// retry idempotence).
func applyCreateCmd(ctx context.Context, n *cluster.Node, code string, nonce uint64, url string) (*link.Link, error) {
	return n.ApplyCreate(ctx, &command.CreateIfAbsent{Code: code, Now: time.Now().UTC(), Nonce: nonce, Request: link.CreateRequest{URL: url, Redirect: link.DefaultRedirect}})
}

func TestJoinFillsUnderReplicatedShards(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 2})
	tc.StartAll(0, 1)
	tc.Nodes[2] = nil
	tc.WaitReplicated(2)
	l, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://two.example"})
	if err != nil {
		t.Fatal(err)
	}
	tc.Start(2)
	tc.WaitReplicated(3)
	third := tc.Nodes[2]
	if len(third.LocalShards()) != 4 {
		t.Fatalf("the joining node hosts %d shards", len(third.LocalShards()))
	}
	s := third.LocalShard(third.Locate(l.Code))
	testkit.WaitFor(t, 20*time.Second, "the new replica has the old link", func() bool {
		got, err := s.Read(l.Code)
		return err == nil && got.URL == "https://two.example"
	})
}

// TestCatchUpBySnapshot: a node down while the shards wrote far past their
// trailing logs must be brought back by InstallSnapshot (FSM Restore), and
// then hold every link.
func TestCatchUpBySnapshot(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	for i := range tc.Cfgs {
		tc.Cfgs[i].Snapshots = raftgroup.SnapshotPolicy{Threshold: 16, TrailingLogs: 8, Interval: 100 * time.Millisecond}
	}
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	tc.Stop(2)
	var links []*link.Link
	// Aliases, which go where the ring puts them: every shard gets enough
	// entries to snapshot (a node's generated codes go to one shard it
	// leads at a time).
	for i := 0; i < 200; i++ {
		l, err := tc.Nodes[i%2].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://snap.example/%d", i), Alias: fmt.Sprintf("snap-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
	}
	// Wait until every shard has snapshotted and truncated its log past
	// what the stopped node has.
	testkit.WaitFor(t, 20*time.Second, "snapshots on the survivors", func() bool {
		for _, s := range tc.Nodes[0].LocalShards() {
			if s.Group().Stats()["last_snapshot_index"] == "0" {
				return false
			}
		}
		return true
	})
	// What the survivors keep as snapshots are markers, not copies of the
	// state (see fsm.LiveStateMarker).
	states, _ := filepath.Glob(filepath.Join(tc.Cfgs[0].DataDir, "shards", "*", "snapshots", "*", "state.bin"))
	if len(states) == 0 {
		t.Fatal("no snapshots on disk")
	}
	for _, f := range states {
		if st, err := os.Stat(f); err != nil || st.Size() > 64 {
			t.Fatalf("snapshot %s holds %d bytes (%v), want a marker", f, st.Size(), err)
		}
	}
	tc.Start(2)
	back := tc.Nodes[2]
	// Writes go on while it catches up, so the state a leader streams is
	// ahead of the snapshot's index and raft replays entries the state
	// already holds.
	for i := 200; i < 260; i++ {
		l, err := tc.Nodes[i%2].Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://snap.example/%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, l)
	}
	waitHoldsLocally(t, back, links, "catch-up by snapshot")
	restored := 0
	for _, s := range back.LocalShards() {
		restored += int(s.Restores())
	}
	if restored == 0 {
		t.Fatal("the node caught up without installing a snapshot; the test did not test that path")
	}
	// The restored node serves reads from its own state and takes writes.
	if _, err := back.Links().Create(ctx(t), link.CreateRequest{URL: "https://after-restore.example"}); err != nil {
		t.Fatal(err)
	}
}

// TestCreateRetriedAcrossLeaderChange: a create whose answer was lost is
// retried, with the same code and nonce, after the shard's leadership moved
// to another node: the retry returns the same link, and no second link or
// conflict appears.
func TestCreateRetriedAcrossLeaderChange(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	const code = "moving-leader"
	sid := tc.Nodes[0].Locate(code)
	leaderIdx := func() int {
		for i, n := range tc.Nodes {
			if s := n.LocalShard(sid); s != nil && s.Group().IsLeader() {
				return i
			}
		}
		return -1
	}
	var first int
	testkit.WaitFor(t, 10*time.Second, "a leader", func() bool { first = leaderIdx(); return first >= 0 })
	l1, err := applyCreateCmd(ctx(t), tc.Nodes[first], code, 4242, "https://moving.example")
	if err != nil {
		t.Fatal(err)
	}
	// Move the shard's leadership elsewhere. A transfer may time out on a
	// loaded machine (the target must catch up within an election
	// timeout) or meet the balancer's: ask again until another node leads.
	testkit.WaitFor(t, 30*time.Second, "a new leader", func() bool {
		if i := leaderIdx(); i >= 0 && i != first {
			return true
		}
		if g := tc.Nodes[first].LocalShard(sid).Group(); g.IsLeader() {
			tctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := g.TransferLeadership(tctx, "", ""); err != nil {
				t.Logf("transfer: %v; again", err)
			}
			cancel()
		}
		return false
	})
	// The retry goes through the old leader, which now forwards it.
	l2, err := applyCreateCmd(ctx(t), tc.Nodes[first], code, 4242, "https://moving.example")
	if err != nil {
		t.Fatal(err)
	}
	if l2.Version != l1.Version || l2.Nonce != l1.Nonce {
		t.Fatalf("retry made another link: %+v vs %+v", l2, l1)
	}
}

// TestStrangerWithAnotherKey: nodes sharing a cluster key form a cluster; a
// node with another key is never seen by them and never gets in.
func TestStrangerWithAnotherKey(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 2})
	tc.Cfgs[2].ClusterKey = testcluster.Key(t)
	tc.StartAll(0, 1)
	tc.Nodes[2] = nil
	tc.WaitReplicated(2)
	// The stranger keeps trying to join and waits to be added; it never
	// gets in, with another key or with none.
	keyless := tc.Cfgs[2]
	keyless.ClusterKey, keyless.Insecure, keyless.DataDir = nil, true, t.TempDir()
	for _, cfg := range []cluster.Config{tc.Cfgs[2], keyless} {
		stranger, err := cluster.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = stranger.Open(c)
		cancel()
		if err == nil {
			stranger.Close()
			t.Fatalf("a node with key %v (insecure %v) joined", cfg.ClusterKey, cfg.Insecure)
		}
	}
	for _, n := range tc.Live() {
		if got := len(n.GossipMembers()); got != 2 {
			t.Fatalf("%s sees %d members", n.ID(), got)
		}
	}
	if _, err := cluster.New(cluster.Config{DataDir: t.TempDir(), GossipAddr: "127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "linknode keygen") {
		t.Fatalf("a node without a cluster key: %v", err)
	}
}

// TestRemoveNode: the operator removes a dead node; every group drops it,
// writes go on with the rest, and the node is not taken back when it
// returns under the same ID.
func TestRemoveNode(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	// LiveNodes (the share of a link's password guesses each node allows)
	// counts the live members, itself included.
	testkit.WaitFor(t, 10*time.Second, "3 live nodes seen by each", func() bool {
		return tc.Nodes[0].Admin().LiveNodes() == 3 && tc.Nodes[1].Admin().LiveNodes() == 3 && tc.Nodes[2].Admin().LiveNodes() == 3
	})
	tc.Stop(2)
	testkit.WaitFor(t, 30*time.Second, "2 live nodes once n3 stops", func() bool {
		return tc.Nodes[0].Admin().LiveNodes() == 2 && tc.Nodes[1].Admin().LiveNodes() == 2
	})
	if err := tc.Nodes[1].Admin().RemoveNode(ctx(t), "n3"); err != nil {
		t.Fatal(err)
	}
	if err := tc.Nodes[0].Admin().RemoveNode(ctx(t), "n3"); err != nil {
		t.Fatalf("removal is idempotent: %v", err)
	}
	if err := tc.Nodes[0].Admin().RemoveNode(ctx(t), "nobody"); !errors.Is(err, status.ErrUnknownNode) {
		t.Fatalf("unknown node: %v", err)
	}
	tc.WaitReplicated(2)
	testkit.WaitFor(t, 10*time.Second, "n3 out of the meta group", func() bool {
		return len(tc.Nodes[0].Admin().Status().Meta.Replicas) == 2
	})
	l, err := tc.Nodes[1].Links().Create(ctx(t), link.CreateRequest{URL: "https://after-removal.example"})
	if err != nil {
		t.Fatal(err)
	}
	// n3 comes back on its old data: nobody adds it again.
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	back, err := cluster.New(tc.Cfgs[2])
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Open(c); err == nil {
		defer back.Close()
	}
	time.Sleep(time.Second) // give a wrong re-add the chance to happen; nothing to poll for its absence
	for _, n := range tc.Live() {
		if reps := n.Admin().Status().Meta.Replicas; len(reps) != 2 {
			t.Fatalf("%s: meta group %v after the removed node returned", n.ID(), reps)
		}
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || got.URL != l.URL {
			t.Fatalf("%s: %+v, %v", n.ID(), got, err)
		}
	}
}

// TestConcurrentCreatesAcrossNodesAreDistinct: every node leases its own ID
// ranges through the meta group; concurrent creates on all nodes never share
// a code.
func TestConcurrentCreatesAcrossNodesAreDistinct(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	const perNode, workers = 100, 4
	var mu sync.Mutex
	seen := map[string]string{}
	var wg sync.WaitGroup
	for i, n := range tc.Nodes {
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; k < perNode/workers; k++ {
					url := fmt.Sprintf("https://distinct.example/%d/%d/%d", i, w, k)
					l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: url})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					if prev, dup := seen[l.Code]; dup {
						t.Errorf("code %s issued for %s and %s", l.Code, prev, url)
					}
					seen[l.Code] = url
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(seen) != 3*perNode {
		t.Fatalf("%d codes for %d creates", len(seen), 3*perNode)
	}
	// Once quiet, every replica of every group sums up the same, and every
	// node holds the same lease history, without overlaps.
	testkit.WaitFor(t, 30*time.Second, "replicas with equal digests", func() bool {
		var ref []status.Digest
		for _, n := range tc.Nodes {
			ds, err := n.Admin().Digests()
			if err != nil || len(ds) != 1+4 {
				return false
			}
			if ref == nil {
				ref = ds
			} else if !slices.Equal(ref, ds) {
				return false
			}
		}
		return ref[0].Items > 0
	})
	leases, err := tc.Nodes[0].Admin().Leases()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(leases, func(a, b status.Lease) int { return cmp.Compare(a.Start, b.Start) })
	for i := 1; i < len(leases); i++ {
		if leases[i].Start < leases[i-1].End {
			t.Fatalf("leases overlap: %+v, %+v", leases[i-1], leases[i])
		}
	}
	for _, n := range tc.Nodes[1:] {
		other, _ := n.Admin().Leases()
		if len(other) != len(leases) {
			t.Fatalf("%s holds %d lease grants, %s %d", n.ID(), len(other), tc.Nodes[0].ID(), len(leases))
		}
	}
}

// waitHoldsLocally waits until n's own replicas (its bbolt files, not a
// forwarded read) hold every link with its URL.
func waitHoldsLocally(tb testing.TB, n *cluster.Node, links []*link.Link, what string) {
	tb.Helper()
	testkit.WaitFor(tb, 30*time.Second, what, func() bool {
		for _, l := range links {
			s := n.LocalShard(n.Locate(l.Code))
			if s == nil {
				return false
			}
			if got, err := s.Read(l.Code); err != nil || got.URL != l.URL {
				return false
			}
		}
		return true
	})
}

// TestCreateManyThroughEveryNode: a bulk create sent to any node lands each
// shard's share through that shard's leader (forwarded over the RPC for
// shards led elsewhere), answers every link as Create would, and what it
// made is readable on every node at once.
func TestCreateManyThroughEveryNode(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	if _, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://bulk.example/old", Alias: "bulk-old"}); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for ni, n := range tc.Nodes {
		var reqs []link.CreateRequest
		for i := 0; i < 200; i++ {
			req := link.CreateRequest{URL: fmt.Sprintf("https://bulk.example/%d/%d", ni, i)}
			if i%40 == 0 {
				req.Alias = fmt.Sprintf("bulk-%d-%d", ni, i)
			}
			reqs = append(reqs, req)
		}
		reqs = append(reqs, link.CreateRequest{URL: "https://bulk.example/clash", Alias: "bulk-old"})
		res := n.Links().CreateMany(ctx(t), reqs)
		if len(res) != len(reqs) {
			t.Fatalf("%d results for %d requests", len(res), len(reqs))
		}
		if !errors.Is(res[200].Err, link.ErrAliasTaken) {
			t.Fatalf("taken alias through %s: %+v", n.ID(), res[200])
		}
		for i, r := range res[:200] {
			if r.Err != nil {
				t.Fatalf("create %d through %s: %v", i, n.ID(), r.Err)
			}
			if r.Link.URL != reqs[i].URL || (reqs[i].Alias != "" && r.Link.Code != reqs[i].Alias) || seen[r.Link.Code] {
				t.Fatalf("create %d through %s = %+v", i, n.ID(), r.Link)
			}
			seen[r.Link.Code] = true
			for _, reader := range tc.Nodes {
				got, err := reader.Links().Resolve(ctx(t), r.Link.Code)
				if err != nil || got.URL != r.Link.URL {
					t.Fatalf("read %s on %s: %+v, %v", r.Link.Code, reader.ID(), got, err)
				}
			}
		}
	}
	if got, err := tc.Nodes[2].Links().Resolve(ctx(t), "bulk-old"); err != nil || got.URL != "https://bulk.example/old" {
		t.Fatalf("taken alias changed: %+v, %v", got, err)
	}
	// Large links (a 2 KB URL and two tags), 1.2 MB of them on one shard
	// that the node they go through does not lead: its share must be cut
	// into entries by their encoded size, or the forwarded batch overflows
	// the 1 MiB RPC frame and every link fails. (One shard, not all four:
	// 4.4 MB through three replicas under -race took this test past two
	// minutes in CI beside the chaos tests.)
	var via *cluster.Node // a node that forwards some shard's writes
	var far command.ShardID
	for _, n := range tc.Nodes {
		for _, sh := range n.LocalShards() {
			if !sh.Group().IsLeader() {
				via, far = n, sh.ID()
			}
		}
	}
	if via == nil {
		t.Fatal("every node leads every shard")
	}
	tags := []string{"big", strings.Repeat("t", 64)}
	var big []link.CreateRequest
	for i := 0; len(big) < 500; i++ {
		alias := fmt.Sprintf("big-%d", i)
		if via.Locate(alias) == far {
			big = append(big, link.CreateRequest{Alias: alias, Tags: tags,
				URL: fmt.Sprintf("https://bulk.example/big/%d?pad=%s", i, strings.Repeat("p", 2300))})
		}
	}
	bigCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, r := range via.Links().CreateMany(bigCtx, big) {
		if r.Err != nil || len(r.Link.Tags) != 2 || r.Link.Code != big[i].Alias {
			t.Fatalf("large create %d through %s: %+v, %v", i, via.ID(), r.Link, r.Err)
		}
	}
}

// TestWritesFromANodeWithoutAReplicaTakeOneHop: with two replicas per
// shard on three nodes, a node that hosts no replica of a shard sends its
// writes there straight to the leader once it has learned it: a replica
// that is not the leader relays the first write, and (while leadership
// stays put) no later one.
func TestWritesFromANodeWithoutAReplicaTakeOneHop(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	relayed := map[string]*relayCounter{}
	for i := range tc.Cfgs {
		tc.Cfgs[i].ReplicationFactor = 2
		relayed[tc.Cfgs[i].NodeID] = &relayCounter{}
		tc.Cfgs[i].Observer = relayed[tc.Cfgs[i].NodeID]
	}
	tc.StartAll(0, 1, 2)
	byID := map[string]*cluster.Node{}
	for _, n := range tc.Nodes {
		byID[n.ID()] = n
	}
	// Shard 0's replicas, in placement order, and the node without one.
	var reps []string
	p := tc.WaitPlaced(2)
	reps = p.Shards[0]
	var outsider *cluster.Node
	for _, n := range tc.Nodes {
		if !slices.Contains(reps, n.ID()) {
			outsider = n
		}
	}
	first, second := byID[reps[0]], byID[reps[1]]
	var codes []string
	for i := 0; len(codes) < 100; i++ {
		if c := fmt.Sprintf("hop-%d", i); outsider.Locate(c) == 0 {
			codes = append(codes, c)
		}
	}
	relays := func() uint64 { return relayed[first.ID()].n.Load() + relayed[second.ID()].n.Load() }
	// term reads shard 0's term on the second replica: a write whose term
	// did not move saw no leadership change (the leader balancer may move
	// it at any time, and that is not what is under test).
	term := func() uint64 { return second.LocalShard(0).Group().Term() }
	// The leader must be the second replica, so that asking the replicas
	// in order reaches a follower first. The first write (no hint yet) is
	// relayed once by the first replica; if leadership moved during it,
	// set up again with the next code.
	written := 0
	for attempt := 0; ; attempt++ {
		if attempt == 5 {
			t.Fatal("leadership of shard 0 moved during each of 5 first writes")
		}
		testkit.WaitFor(t, 30*time.Second, "shard 0 led by its second replica", func() bool {
			if second.LocalShard(0).Group().LeaderReady() {
				return true
			}
			if first.LocalShard(0).Group().IsLeader() {
				tctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				_ = first.LocalShard(0).Group().TransferLeadership(tctx, second.ID(), second.RaftAddr())
				cancel()
			}
			return false
		})
		outsider.SetLeaderHint(command.ShardID(0).Group(), "")
		before, t0 := relays(), term()
		if _, err := outsider.Links().Create(ctx(t), link.CreateRequest{URL: "https://hop.example/0", Alias: codes[written]}); err != nil {
			t.Fatal(err)
		}
		written++
		got := relays() - before
		if term() != t0 || !second.LocalShard(0).Group().IsLeader() {
			t.Logf("attempt %d: leadership moved during the first write (%d relays); again", attempt, got)
			continue
		}
		if got != 1 {
			t.Fatalf("first write: %d relays with leadership unchanged; want 1", got)
		}
		break
	}
	// With leadership unchanged no later write is relayed. A write counts
	// when shard 0's term is the one the previous write's answer was
	// given in, before and after it (whichever replica leads): after a
	// leadership change (the balancer, or an election under a
	// loaded machine) the first write may be relayed once more, until an
	// answer names the new leader. 30 such writes are needed, of at most
	// the 100 codes.
	stable, strays, last := 0, 0, term()
	for i, code := range codes[written:] {
		if stable == 30 {
			codes = codes[:written+i]
			break
		}
		before, t0 := relays(), term()
		if _, err := outsider.Links().Create(ctx(t), link.CreateRequest{URL: fmt.Sprintf("https://hop.example/%d", i+1), Alias: code}); err != nil {
			t.Fatal(err)
		}
		got, t1 := relays()-before, term()
		if t0 == last && t1 == t0 {
			if got == 0 {
				stable++
			} else if strays++; strays > 2 {
				// A leadership transfer the balancer started and that
				// failed leaves the term as it was, yet the leader
				// refused writes meanwhile: once or twice, not more.
				t.Fatalf("write %d (%s) was relayed %d times with leadership unchanged (term %d), the %d-th such write; want none", i+1, code, got, t0, strays)
			}
		}
		last = t1
	}
	if stable < 30 {
		t.Fatalf("leadership of shard 0 moved so often that only %d of %d writes saw one leader throughout", stable, len(codes)-written)
	}
	for _, code := range codes {
		if _, err := first.Links().Resolve(ctx(t), code); err != nil {
			t.Fatalf("%s: %v", code, err)
		}
	}
	// An answer naming an address that is no replica of the shard (a
	// hostile or confused peer) is not followed.
	if h := outsider.LeaderHint(command.ShardID(0).Group()); h != first.RaftAddr() && h != second.RaftAddr() {
		t.Fatalf("hint %q names neither replica (%s, %s)", h, first.RaftAddr(), second.RaftAddr())
	}
	outsider.RememberLeader(command.ShardID(0).Group(), "203.0.113.9:7000")
	if got := outsider.LeaderHint(command.ShardID(0).Group()); got != "" {
		t.Fatalf("a leader hint outside the shard's replicas was kept: %q", got)
	}
}

// relayCounter counts the writes a node relays (shard.Observer.Relayed).
type relayCounter struct{ n atomic.Uint64 }

func (*relayCounter) CacheHit(int)               {}
func (*relayCounter) CacheMiss(int)              {}
func (*relayCounter) Applied(int, time.Duration) {}
func (c *relayCounter) Relayed(int)              { c.n.Add(1) }

// TestAdvertiseHostName: nodes that advertise a host name (as containers
// do: -advertise-host n1) form a cluster; memberlist is given the name's
// address.
func TestAdvertiseHostName(t *testing.T) {
	t.Parallel()
	tc := testcluster.Start(t, testcluster.Options{Size: 3, Shards: 2, Config: func(_ int, cfg *cluster.Config) {
		cfg.AdvertiseHost = "localhost"
	}})
	l, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://named.example/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range tc.Nodes {
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || got.URL != l.URL {
			t.Fatalf("%s: %+v, %v", n.ID(), got, err)
		}
	}
}
