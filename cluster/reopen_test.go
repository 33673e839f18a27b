package cluster_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// A leader that commits a configuration without itself shuts its raft
// down (ShutdownOnRemove); while the placement still names the node, its
// replica must come back, not stay dead until the node restarts (JEPSEN.md
// finding 8 got there through a stale configuration). Here the leader
// removes itself by hand: the new leader adds the node back, and the node
// reopens the shard and applies what was written meanwhile. Without the
// reopen the old replica stays stopped and the test times out.
func TestReplicaWhoseRaftShutItselfDownComesBack(t *testing.T) {
	t.Parallel()
	tc, n := leadingSome(t)
	var id command.ShardID = -1
	for i := range tc.Shards {
		if s := n.LocalShard(command.ShardID(i)); s != nil && s.Group().IsLeader() {
			id = command.ShardID(i)
			break
		}
	}
	if id < 0 {
		t.Fatalf("%s leads no shard", n.ID())
	}
	old := n.LocalShard(id)
	// The removal commits, then the leader steps down and shuts down: its
	// future may report either.
	if err := old.Group().Remove(ctx(t), n.ID()); err != nil {
		t.Logf("removing %s from shard %d: %v", n.ID(), id, err)
	}
	// The node still shows the stopped replica (sync waits a few reconcile
	// intervals before reopening it), or has reopened it already.
	testkit.WaitFor(t, 10*time.Second, "the leader's raft to shut itself down", func() bool {
		return old.Group().Stopped() || n.LocalShard(id) != old
	})
	// A link written to the shard after the removal, through another node.
	var other = tc.Nodes[0]
	if other == n {
		other = tc.Nodes[1]
	}
	alias := ""
	for i := 0; alias == ""; i++ {
		if a := fmt.Sprintf("reopen-%d", i); n.Locate(a) == id {
			alias = a
		}
	}
	testkit.Eventually(t, 20*time.Second, func() error {
		_, err := other.Links().Create(ctx(t), link.CreateRequest{URL: "https://reopen.example/", Alias: alias})
		if errors.Is(err, link.ErrAliasTaken) {
			return nil // an earlier try committed
		}
		return err
	})
	testkit.Eventually(t, 30*time.Second, func() error {
		s := n.LocalShard(id)
		switch {
		case s == nil:
			return errors.New("not hosted")
		case s == old:
			return fmt.Errorf("still the replica whose raft stopped (stopped: %v)", old.Group().Stopped())
		case s.Group().Stopped():
			return errors.New("the reopened replica stopped")
		}
		l, err := s.Read(alias)
		if err != nil {
			return fmt.Errorf("reading %s here: %w", alias, err)
		}
		if l.URL != "https://reopen.example/" {
			return fmt.Errorf("%s here is %+v", alias, l)
		}
		return nil
	})
}
