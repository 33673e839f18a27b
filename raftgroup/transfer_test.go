package raftgroup

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
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
	leader := func(among ...string) string {
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			for _, id := range among {
				if rafts[id].State() == raft.Leader {
					return id
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no leader among %v", among)
		return ""
	}
	a := leader(ids...)
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
	deadline := time.Now().Add(5 * time.Second)
	for rafts[a].State() == raft.Leader && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rafts[a].State() == raft.Leader {
		t.Fatal("a kept leading while cut off")
	}
	// Let a's replication to b come back from its call and stop.
	time.Sleep(2500 * time.Millisecond)
	trans[a].Connect(addrs[c], trans[c])
	trans[c].Connect(addrs[a], trans[a])
	// Make a lead again (c and a are a quorum).
	deadline = time.Now().Add(15 * time.Second)
	for rafts[a].State() != raft.Leader && time.Now().Before(deadline) {
		if rafts[c].State() == raft.Leader {
			_ = rafts[c].LeadershipTransferToServer(raft.ServerID(a), addrs[a]).Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rafts[a].State() != raft.Leader {
		t.Fatal("a never led again")
	}
	err := rafts[a].Apply([]byte("z"), time.Second).Error()
	if errors.Is(err, raft.ErrLeadershipTransferInProgress) {
		t.Fatalf("a leads but refuses writes: %v (hashicorp/raft#696)", err)
	}
	if err != nil {
		t.Fatalf("apply on the new leader: %v", err)
	}
}
