package raftgroup

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/internal/testkit"
)

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnap{}, nil }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnap struct{}

func (nopSnap) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnap) Release()                          {}

// TestTransferInterruptedByStepDownDoesNotWedgeTheLeader reproduces
// hashicorp/raft#696 with raft's in-memory parts: a leadership transfer
// whose target's replication is busy, a second transfer queued behind it,
// and the leader stepping down meanwhile. Unpatched, raft leaves "transfer
// in progress" set for good, and the node refuses every Apply whenever it
// leads again (what a chaos run saw: JEPSEN.md, finding 3).
func TestTransferInterruptedByStepDownDoesNotWedgeTheLeader(t *testing.T) {
	ids := []string{"a", "b", "c"}
	trans := map[string]*raft.InmemTransport{}
	addrs := map[string]raft.ServerAddress{}
	for _, id := range ids {
		addrs[id], trans[id] = raft.NewInmemTransportWithTimeout(raft.ServerAddress(id), 2*time.Second)
	}
	for _, x := range ids {
		for _, y := range ids {
			if x != y {
				trans[x].Connect(addrs[y], trans[y])
			}
		}
	}
	rafts := map[string]*raft.Raft{}
	var servers []raft.Server
	for _, id := range ids {
		servers = append(servers, raft.Server{ID: raft.ServerID(id), Address: addrs[id]})
	}
	for _, id := range ids {
		c := raft.DefaultConfig()
		c.LocalID = raft.ServerID(id)
		c.HeartbeatTimeout, c.ElectionTimeout = 200*time.Millisecond, 200*time.Millisecond
		c.LeaderLeaseTimeout, c.CommitTimeout = 100*time.Millisecond, 5*time.Millisecond
		c.Logger = hclog.NewNullLogger()
		store := raft.NewInmemStore()
		r, err := raft.NewRaft(c, nopFSM{}, store, store, raft.NewInmemSnapshotStore(), trans[id])
		if err != nil {
			t.Fatal(err)
		}
		rafts[id] = r
		t.Cleanup(func() { _ = r.Shutdown().Error() })
	}
	if err := rafts["a"].BootstrapCluster(raft.Configuration{Servers: servers}).Error(); err != nil {
		t.Fatal(err)
	}
	var a string
	testkit.WaitFor(t, 10*time.Second, "a leader", func() bool {
		for _, id := range ids {
			if rafts[id].State() == raft.Leader {
				a = id
				return true
			}
		}
		return false
	})
	var b, c string
	for _, id := range ids {
		if id != a && b == "" {
			b = id
		} else if id != a {
			c = id
		}
	}
	if err := rafts[a].Apply([]byte("x"), time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	// b stops taking RPCs (its transport stays connected), so a's
	// replication to b sits in 2 s calls, and a has entries b lacks.
	_ = rafts[b].Shutdown().Error()
	for i := 0; i < 20; i++ {
		_ = rafts[a].Apply([]byte("y"), time.Second).Error()
	}
	// The first transfer times out and leaves its request queued for the
	// busy replication; the second blocks sending behind it.
	if err := rafts[a].LeadershipTransferToServer(raft.ServerID(b), addrs[b]).Error(); err == nil {
		t.Fatal("transfer to a stopped node succeeded")
	}
	second := rafts[a].LeadershipTransferToServer(raft.ServerID(b), addrs[b])
	_ = second
	// a steps down: cut it off from c.
	trans[a].Disconnect(addrs[c])
	trans[c].Disconnect(addrs[a])
	testkit.WaitFor(t, 5*time.Second, "a to step down while cut off", func() bool { return rafts[a].State() != raft.Leader })
	// Let a's replication to b come back from its call and stop: the
	// in-memory transport's 2 s timeout is the scenario's clock, and raft
	// shows nothing to poll for the call's end.
	time.Sleep(2500 * time.Millisecond)
	trans[a].Connect(addrs[c], trans[c])
	trans[c].Connect(addrs[a], trans[a])
	// Make a lead again (c and a are a quorum).
	testkit.WaitFor(t, 15*time.Second, "a to lead again", func() bool {
		if rafts[c].State() == raft.Leader {
			_ = rafts[c].LeadershipTransferToServer(raft.ServerID(a), addrs[a]).Error()
		}
		return rafts[a].State() == raft.Leader
	})
	err := rafts[a].Apply([]byte("z"), time.Second).Error()
	if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		t.Fatalf("a leads but refuses writes: %v (hashicorp/raft#696)", err)
	}
	if err != nil {
		t.Fatalf("apply on the new leader: %v", err)
	}
}
