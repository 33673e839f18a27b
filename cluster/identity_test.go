package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/linkraft/linkraft/cluster"
	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/loopback"
	"github.com/linkraft/linkraft/internal/status"
	"github.com/linkraft/linkraft/internal/testcluster"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
	"github.com/linkraft/linkraft/peer"
	"github.com/linkraft/linkraft/raftgroup"
)

// TestWipedNodeUnderItsOldIDIsRefused: n3 comes back under its ID with an
// empty data dir, on its old addresses (a replaced disk). It is refused:
// told why through gossip, its start fails naming linknode remove, and no
// group takes it back (its handshakes are refused, so it cannot vote).
// Writes go on with the other two.
func TestWipedNodeUnderItsOldIDIsRefused(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 3})
	tc.StartAll(0, 1, 2)
	tc.WaitReplicated(3)
	oldInc := tc.Nodes[2].Incarnation()
	tc.Stop(2)
	tc.Cfgs[2].DataDir = t.TempDir() // same ID, same peer and gossip addresses
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wiped, err := cluster.New(tc.Cfgs[2])
	if err != nil {
		t.Fatal(err)
	}
	err = wiped.Open(c)
	if err == nil {
		wiped.Close()
		t.Fatal("a wiped node was taken back under its old ID")
	}
	if !strings.Contains(err.Error(), "came back with a new data dir") || !strings.Contains(err.Error(), "linknode remove n3") {
		t.Fatalf("the wiped node's error does not say why: %v", err)
	}
	for _, n := range tc.Live() {
		inc, ok, err := n.Meta().Incarnation("n3")
		if err != nil || !ok || inc != oldInc {
			t.Fatalf("%s: n3's registered incarnation %q %v %v, want the old %q", n.ID(), inc, ok, err, oldInc)
		}
		if err := n.VerifyPeer("n3", "0123456789abcdef"); !errors.Is(err, cluster.ErrRefused) {
			t.Fatalf("%s accepts a handshake of n3 with another incarnation: %v", n.ID(), err)
		}
	}
	if _, err := tc.Nodes[0].Links().Create(ctx(t), link.CreateRequest{URL: "https://on.example/"}); err != nil {
		t.Fatalf("create with n3 refused: %v", err)
	}
	// No group applied anything for the wiped process: it never got the
	// meta state.
	if wiped.Meta() != nil {
		if s, _ := wiped.Meta().Settings(); s != nil {
			t.Fatal("the wiped node received the cluster's settings")
		}
	}
}

// TestNodeOfAnotherClusterIsRefused: a node that formed a cluster of its
// own (with the same key, as an operator's mistake would have it) and is
// then pointed at this cluster is never added: it is told why, says so in
// its readiness, and the cluster's membership is unchanged.
func TestNodeOfAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	tc := testcluster.New(t, testcluster.Options{Size: 3, Expect: 2})
	tc.StartAll(0, 1)
	tc.Nodes[2] = nil
	tc.WaitReplicated(2)
	// n3 first runs as a single-node cluster of its own.
	other := tc.Cfgs[2]
	other.Join, other.BootstrapExpect = nil, 1
	alone, err := cluster.New(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := alone.Open(ctx(t)); err != nil {
		t.Fatal(err)
	}
	alone.Close()
	// Then it is started with -join on its data dir.
	tc.Cfgs[2].BootstrapExpect = 1
	tc.Start(2)
	n3 := tc.Nodes[2]
	testkit.WaitFor(t, 15*time.Second, "n3 told it was refused", func() bool { return n3.Refusal() != "" })
	if r := n3.Refusal(); !strings.Contains(r, "another cluster's data dir") {
		t.Fatalf("refusal %q", r)
	}
	if err := n3.Admin().Ready(ctx(t)); !errors.Is(err, status.ErrNotReady) || !strings.Contains(err.Error(), "another cluster") {
		t.Fatalf("Ready = %v", err)
	}
	for _, n := range tc.Nodes[:2] {
		addrs, err := n.Meta().Addresses()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := addrs["n3"]; ok {
			t.Fatalf("%s took n3 of another cluster into the meta group", n.ID())
		}
	}
}

// TestJoinNeverBootstraps: -join without -bootstrap-expect joins or waits;
// a node that reaches no one (a slow peer, a wrong key) does not form a
// cluster of its own.
func TestJoinNeverBootstraps(t *testing.T) {
	t.Parallel()
	cfg := cluster.Config{NodeID: "lone", DataDir: t.TempDir(), RaftAddr: "127.0.0.1:0", GossipAddr: loopback.Addr(t),
		FastGossip: true, Join: []string{loopback.Addr(t)}, ClusterKey: testcluster.Key(t)}
	n, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := n.Open(c); err == nil {
		n.Close()
		t.Fatal("a join-only node that reached no one opened")
	}
	again, err := cluster.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	c2, cancel2 := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel2()
	_ = again.Open(c2)
	if again.Meta() != nil && again.Meta().HasState() {
		t.Fatal("the join-only node bootstrapped a meta group of its own")
	}
}

// TestPeerCallsToAStartingNodeAreUnavailable: a node's peer port serves
// while the node still waits to join, before it knows the cluster's
// settings. A lookup sent to it then is unavailable (the caller asks
// another replica or answers 503), not a handler panic answered as an
// internal error, as the 5-node chaos run saw of a node the nemesis had
// restarted (and the race detector, of the settings written under it).
func TestPeerCallsToAStartingNodeAreUnavailable(t *testing.T) {
	t.Parallel()
	key := testcluster.Key(t)
	formed := testcluster.Node(t, cluster.Config{NodeID: "n1", ClusterKey: key})
	peerAddr := loopback.Addr(t)
	n, err := cluster.New(cluster.Config{NodeID: "starting", DataDir: t.TempDir(), RaftAddr: peerAddr,
		GossipAddr: loopback.Addr(t), FastGossip: true, Join: []string{loopback.Addr(t)},
		ClusterKey: key, Timing: raftgroup.FastTiming})
	if err != nil {
		t.Fatal(err)
	}
	opening, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Open(opening) }()
	t.Cleanup(func() {
		stop()
		<-done
		n.Close()
	})
	for _, s := range []command.ShardID{0, 1 << 20} {
		testkit.Eventually(t, 10*time.Second, func() error {
			_, err := formed.Peers().Lookup(ctx(t), peerAddr, s, "some-code", false, 0)
			if errors.Is(err, link.ErrUnavailable) && !errors.Is(err, peer.ErrUnreachable) && strings.Contains(err.Error(), "is starting") {
				return nil
			}
			return fmt.Errorf("lookup of shard %d on a starting node: %v", s, err)
		})
	}
}
