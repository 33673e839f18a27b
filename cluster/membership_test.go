package cluster_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// writers creates links through the given nodes until stop is called,
// and returns what was acknowledged.
type writers struct {
	stop  atomic.Bool
	wg    sync.WaitGroup
	acked sync.Map // code → url
	n     atomic.Int64
}

func startWriters(t *testing.T, nodes func() []*cluster.Node, count int) *writers {
	w := &writers{}
	for i := range count {
		w.wg.Go(func() {
			for k := 0; !w.stop.Load() && k < 5000; k++ {
				live := nodes()
				if len(live) == 0 {
					return
				}
				n := live[(i+k)%len(live)]
				u := fmt.Sprintf("https://moving.example/%d/%d", i, k)
				l, err := n.Links().Create(ctx(t), link.CreateRequest{URL: u})
				if err == nil {
					w.acked.Store(l.Code, u)
					w.n.Add(1)
				}
			}
		})
	}
	testkit.WaitFor(t, 20*time.Second, "writes under way", func() bool { return w.n.Load() >= 10 })
	return w
}

// halt stops the writers and waits for them.
func (w *writers) halt() { w.stop.Store(true); w.wg.Wait() }

// check reads every acknowledged link through every node.
func (w *writers) check(t *testing.T, nodes []*cluster.Node) int {
	t.Helper()
	count := 0
	w.acked.Range(func(k, v any) bool {
		count++
		for _, n := range nodes {
			testkit.Eventually(t, 10*time.Second, func() error {
				got, err := n.Links().Get(ctx(t), k.(string), true)
				if err != nil || got.URL != v.(string) {
					return fmt.Errorf("%s: %s: %+v, %v", n.ID(), k, got, err)
				}
				return nil
			})
		}
		return true
	})
	return count
}

// TestJoinsMoveReplicasUnderWrites: two nodes join a 3-node cluster while
// clients write; replicas move to them one at a time until every node
// hosts its share, leaderships spread, and every acknowledged create is
// readable on every node.
func TestJoinsMoveReplicasUnderWrites(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 5, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	first := tc.Live()
	w := startWriters(t, func() []*cluster.Node { return first }, 2)
	tc.Start(3)
	tc.Start(4)
	p := tc.WaitSpread(3, 90*time.Second)
	w.halt()
	// 4 shards × 3 replicas over 5 nodes: 2 or 3 each, so the new nodes
	// got replicas they were not given at the join (every shard was full).
	for _, id := range []string{"n4", "n5"} {
		hosted := 0
		for _, reps := range p.Shards {
			for _, r := range reps {
				if r == id {
					hosted++
				}
			}
		}
		if hosted < 2 {
			t.Fatalf("%s hosts %d replicas: %v", id, hosted, p.Shards)
		}
	}
	tc.WaitBalanced()
	t.Logf("%d links acknowledged during the moves, placement version %d", w.check(t, tc.Live()), p.Version)
}

// TestDrainThenRemove: a drained node's replicas move to the others; it
// then hosts none (its shard files deleted) and is removed without any
// shard running short. A drain that would leave too few nodes is refused.
func TestDrainThenRemove(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 4, Shards: 4})
	tc.StartAll(0, 1, 2, 3)
	n1, n4 := tc.Nodes[0], tc.Nodes[3]
	tc.WaitSpread(3, 60*time.Second)
	first := tc.Live()[:3]
	w := startWriters(t, func() []*cluster.Node { return first }, 2)
	if err := n1.Admin().DrainNode(ctx(t), "nobody", true); !errors.Is(err, status.ErrUnknownNode) {
		t.Fatalf("drain a stranger: %v", err)
	}
	// A drain is idempotent: one whose outcome is unknown (the meta leader
	// lost its lease mid-commit under load) is sent again.
	testkit.Eventually(t, 30*time.Second, func() error { return n1.Admin().DrainNode(ctx(t), "n4", true) })
	if err := n1.Admin().DrainNode(ctx(t), "n3", true); !errors.Is(err, status.ErrCannotDrain) {
		t.Fatalf("a second drain, leaving two nodes for three replicas: %v", err)
	}
	testkit.Eventually(t, 90*time.Second, func() error {
		draining, left, err := n1.Admin().DrainStatus("n4")
		if err != nil || !draining || left != 0 {
			return fmt.Errorf("n4: draining %v, %d replicas left, %v", draining, left, err)
		}
		if k := len(n4.LocalShards()); k != 0 {
			return fmt.Errorf("n4 still hosts %d shards", k)
		}
		return nil
	})
	w.halt()
	testkit.Eventually(t, 30*time.Second, func() error {
		entries, err := os.ReadDir(filepath.Join(tc.Cfgs[3].DataDir, "shards"))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if len(entries) != 0 {
			return fmt.Errorf("n4's shard files are still there: %v", entries)
		}
		return nil
	})
	if err := n1.Admin().RemoveNode(ctx(t), "n4"); err != nil {
		t.Fatal(err)
	}
	tc.Stop(3)
	tc.WaitReplicated(3)
	t.Logf("%d links acknowledged during the drain", w.check(t, tc.Live()))
	if _, err := tc.Nodes[1].Links().Create(ctx(t), link.CreateRequest{URL: "https://after-drain.example"}); err != nil {
		t.Fatal(err)
	}
}

// TestDeadNodeReapedAndReplaced: with -reap-after, a node dead longer than
// that is removed by the meta leader, and a new node takes its replicas.
func TestDeadNodeReapedAndReplaced(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 4, Expect: 3, Config: func(_ int, cfg *cluster.Config) {
		cfg.ReapAfter = 2 * time.Second
	}})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	l, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://before-death.example"})
	if err != nil {
		t.Fatal(err)
	}
	tc.Stop(2) // n3 dies for good
	tc.Start(3)
	testkit.Eventually(t, 60*time.Second, func() error {
		p, err := tc.Nodes[0].Admin().Placement()
		if err != nil || p == nil {
			return fmt.Errorf("placement: %v", err)
		}
		for _, id := range p.Removed {
			if id == "n3" {
				return nil
			}
		}
		return fmt.Errorf("n3 not reaped: %+v", p)
	})
	tc.WaitSpread(3, 60*time.Second)
	for _, n := range tc.Live() {
		if got, err := n.Links().Get(ctx(t), l.Code, true); err != nil || got.URL != l.URL {
			t.Fatalf("%s: %+v, %v", n.ID(), got, err)
		}
	}
	if _, err := tc.Nodes[3].Links().Create(ctx(t), link.CreateRequest{URL: "https://after-reap.example"}); err != nil {
		t.Fatal(err)
	}
}

// TestShardFilesSweptAfterMovingAwayWhileDown: a node drained while it is
// down deletes its replicas' files once it is up again and has learnt that
// the placement no longer names it; and files of a shard not placed on a
// node that it finds at start (a crash between closing a replica that left
// and deleting its files; a replica that moved away while the node was
// down, when the node's meta replica has caught up before its shards are
// opened) are deleted too, where they used to stay for good.
func TestShardFilesSweptAfterMovingAwayWhileDown(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 4, Shards: 2})
	tc.StartAll(0, 1, 2, 3)
	n1 := tc.Nodes[0]
	tc.WaitSpread(3, 60*time.Second)
	shardsDir := filepath.Join(tc.Cfgs[3].DataDir, "shards")
	held, err := os.ReadDir(shardsDir)
	if err != nil || len(held) == 0 {
		t.Fatalf("n4 holds no shard files to begin with: %v, %v", held, err)
	}
	tc.Stop(3)
	// A copy of one replica's files, as a crash in the middle of deleting
	// them would leave them.
	leftover := filepath.Join(shardsDir, held[0].Name())
	saved := filepath.Join(t.TempDir(), "saved")
	if err := os.CopyFS(saved, os.DirFS(leftover)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, func() error { return n1.Admin().DrainNode(ctx(t), "n4", true) })
	testkit.Eventually(t, 90*time.Second, func() error {
		if draining, left, err := n1.Admin().DrainStatus("n4"); err != nil || !draining || left != 0 {
			return fmt.Errorf("n4 (down): draining %v, %d replicas left, %v", draining, left, err)
		}
		return nil
	})
	gone := func() error {
		entries, err := os.ReadDir(shardsDir)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if len(entries) != 0 {
			return fmt.Errorf("n4's shard files are still there: %v", entries)
		}
		return nil
	}
	tc.Start(3)
	testkit.Eventually(t, 30*time.Second, gone)
	// n4's meta replica now knows it hosts nothing: files of a shard it
	// finds at its next start are not opened, only deleted.
	tc.Stop(3)
	if err := os.CopyFS(leftover, os.DirFS(saved)); err != nil {
		t.Fatal(err)
	}
	tc.Start(3)
	testkit.Eventually(t, 30*time.Second, gone)
	if k := len(tc.Nodes[3].LocalShards()); k != 0 {
		t.Fatalf("n4 hosts %d shards after its drain", k)
	}
	p, err := n1.Admin().Placement()
	if err != nil {
		t.Fatal(err)
	}
	for i, nodes := range p.Shards {
		if len(nodes) != 3 || slices.Contains(nodes, "n4") {
			t.Fatalf("shard %d placed on %v", i, nodes)
		}
	}
}
