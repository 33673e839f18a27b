package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/linkraft/linkraft/command"
	"github.com/linkraft/linkraft/fsm"
	"github.com/linkraft/linkraft/internal/testkit"
	"github.com/linkraft/linkraft/link"
)

// The read path over raft's in-memory transport: no peer port, no TLS,
// partitions at will. Each group has a real FSM (the meta FSM's bbolt
// file) and real raft-boltdb stores; only the network is raft's own.

// memCluster is n groups of one Raft group, all connected.
type memCluster struct {
	groups []*Group
	trans  []*raft.InmemTransport
	dirs   []string
}

func newMemCluster(t *testing.T, n int) *memCluster {
	t.Helper()
	c := &memCluster{}
	var servers []Server
	for i := range n {
		dir := t.TempDir()
		f, err := fsm.NewMetaFSM(fsm.MetaConfig{Path: filepath.Join(dir, "state.db")})
		if err != nil {
			t.Fatal(err)
		}
		addr, tr := raft.NewInmemTransport("")
		id := fmt.Sprintf("n%d", i+1)
		g, err := open(Config{Name: "mem", NodeID: id, Dir: dir, FSM: f, Timing: FastTiming}, tr)
		if err != nil {
			f.Close()
			t.Fatal(err)
		}
		t.Cleanup(func() { g.Close() })
		c.groups, c.trans, c.dirs = append(c.groups, g), append(c.trans, tr), append(c.dirs, dir)
		servers = append(servers, Server{ID: id, Address: string(addr)})
	}
	for i, a := range c.trans {
		for j, b := range c.trans {
			if i != j {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	if err := c.groups[0].Bootstrap(servers); err != nil {
		t.Fatal(err)
	}
	return c
}

// leader waits for a ready leader among the groups that are not excluded
// and returns its index.
func (c *memCluster) leader(t *testing.T, except ...int) int {
	t.Helper()
	at := -1
	testkit.WaitFor(t, 15*time.Second, "a ready leader", func() bool {
		for i, g := range c.groups {
			skip := false
			for _, e := range except {
				skip = skip || e == i
			}
			if !skip && g.LeaderReady() {
				at = i
				return true
			}
		}
		return false
	})
	return at
}

// isolate cuts group i off from every other, both ways.
func (c *memCluster) isolate(i int) {
	c.trans[i].DisconnectAll()
	for j, tr := range c.trans {
		if j != i {
			tr.Disconnect(c.trans[i].LocalAddr())
		}
	}
}

// lease applies a lease command through group g and returns its result
// and index.
func lease(t *testing.T, g *Group, n uint64) (*command.LeaseResult, uint64) {
	t.Helper()
	out, index, err := g.Apply(testkit.Context(t, 5*time.Second), (&command.LeaseRange{Node: "n1", N: n}).Encode())
	if err != nil {
		t.Fatal(err)
	}
	return out.(*command.LeaseResult), index
}

// TestReadsNeedAReadyLeader: only a leader whose barrier applied may
// answer a linearizable read; its followers are told to ask the leader,
// and a write it acknowledged is in its state when VerifyRead returns.
func TestReadsNeedAReadyLeader(t *testing.T) {
	c := newMemCluster(t, 3)
	l := c.groups[c.leader(t)]
	r, index := lease(t, l, 10)
	if err := l.VerifyRead(testkit.Context(t, 5*time.Second)); err != nil {
		t.Fatalf("the leader's read: %v", err)
	}
	if l.fsm.AppliedIndex() < index || !l.CaughtUp() {
		t.Fatalf("applied %d, caught up %v after a read", l.fsm.AppliedIndex(), l.CaughtUp())
	}
	for _, g := range c.groups {
		if g == l {
			continue
		}
		if err := g.VerifyRead(testkit.Context(t, time.Second)); !errors.Is(err, link.ErrNotLeader) {
			t.Fatalf("a follower's linearizable read: %v", err)
		}
		if err := g.ConfirmLeader(testkit.Context(t, time.Second)); !errors.Is(err, link.ErrNotLeader) {
			t.Fatalf("a follower confirmed itself: %v", err)
		}
		if _, _, err := g.Apply(testkit.Context(t, time.Second), (&command.LeaseRange{Node: "n2", N: 1}).Encode()); !errors.Is(err, link.ErrNotLeader) {
			t.Fatalf("a follower proposed: %v", err)
		}
		// Its own state catches up to what the leader committed.
		if err := g.WaitCaughtUp(testkit.Context(t, 5*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if r.Start != 0 || r.End != 10 {
		t.Fatalf("lease %+v", r)
	}
}

// TestCutOffLeaderStopsAnswering: a leader cut off from its followers
// confirms itself within its lease and not after it; its linearizable reads
// fail, though raft still calls it leader for a while; the others elect a
// leader that commits; and back on the network the old one steps down and
// holds what the new one committed.
func TestCutOffLeaderStopsAnswering(t *testing.T) {
	c := newMemCluster(t, 3)
	at := c.leader(t)
	old := c.groups[at]
	_, _ = lease(t, old, 1)
	if err := old.ConfirmLeader(testkit.Context(t, 5*time.Second)); err != nil || !old.leaseValid() {
		t.Fatalf("confirm: %v, lease %v", err, old.leaseValid())
	}
	// A transfer it begins ends the lease at once.
	old.resetLease()
	if old.leaseValid() {
		t.Fatal("the lease survived a reset")
	}
	if err := old.ConfirmLeader(testkit.Context(t, 5*time.Second)); err != nil || !old.leaseValid() {
		t.Fatalf("a quorum round after the reset: %v, lease %v", err, old.leaseValid())
	}
	c.isolate(at)
	testkit.WaitFor(t, 5*time.Second, "the lease to run out", func() bool { return !old.leaseValid() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := old.ConfirmLeader(ctx)
	cancel()
	if err == nil {
		t.Fatal("a leader without a quorum confirmed itself after its lease")
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	err = old.VerifyRead(ctx)
	cancel()
	if err == nil {
		t.Fatal("a leader without a quorum answered a linearizable read")
	}
	nu := c.groups[c.leader(t, at)]
	_, after := lease(t, nu, 5)
	for i, tr := range c.trans {
		for j, other := range c.trans {
			if i != j {
				tr.Connect(other.LocalAddr(), other)
			}
		}
	}
	testkit.WaitFor(t, 10*time.Second, "the old leader to step down and catch up", func() bool {
		return !old.IsLeader() && old.fsm.AppliedIndex() >= after && old.CaughtUp()
	})
	if old.LeaderReady() {
		t.Fatal("the old leader still calls itself ready")
	}
}
